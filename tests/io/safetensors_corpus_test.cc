// The container part (items 1-14) of the bad-input corpus, RELIABILITY.md §B.5: each variant gets
// its specific error code and message, or loads when the corpus says it is legal.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/raw_safetensors.h"
#include "support/temp_dir.h"

namespace qlm::io {
namespace {

using qlm::testing::as_bytes;
using qlm::testing::raw_safetensors;
using qlm::testing::TempDir;

SafetensorsFile parse(const std::string& image) { return SafetensorsFile::parse(as_bytes(image), "corpus.safetensors"); }
std::string entry(std::string_view name, std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":{}}})", name, dtype, shape, offsets);
}
std::string object(std::string_view members) { return fmt::format("{{{}}}", members); }
std::string zeros(size_t n) { return std::string(n, '\0'); }
// A one-tensor file whose entry body is `body` (the JSON after "w":) with `data_bytes` zero bytes.
std::string with_entry_body(std::string_view body, size_t data_bytes = 8) {
  return raw_safetensors(fmt::format(R"({{"w":{}}})", body), zeros(data_bytes));
}
std::string with_shape(std::string_view shape) {
  return with_entry_body(fmt::format(R"({{"dtype":"F32","shape":{},"data_offsets":[0,8]}})", shape));
}
std::string with_offsets(std::string_view offsets) {
  return with_entry_body(fmt::format(R"({{"dtype":"F32","shape":[2],"data_offsets":{}}})", offsets));
}

TEST(SafetensorsCorpus, Item01_EmptyAndTinyFiles) {
  TempDir dir;
  EXPECT_QLM_ERROR(SafetensorsFile::open(dir.write("empty.safetensors", "")), "safetensors.too_small",
                   "the file has 0 bytes");
  for (size_t n = 1; n <= 7; ++n)
    EXPECT_QLM_ERROR(SafetensorsFile::open(dir.write("tiny.safetensors", std::string(n, 'x'))), "safetensors.too_small",
                     "re-download");
}

TEST(SafetensorsCorpus, Item02_HeaderLengthField) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("")), "safetensors.json", "empty or only whitespace");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{")), "safetensors.json", "not valid JSON");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", 1000)), "safetensors.header_length", "the file has 10");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", ~uint64_t{0})), "safetensors.header_too_large", "above the limit");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", 100'000'001)), "safetensors.header_too_large", "100000001");
}

TEST(SafetensorsCorpus, Item03_HeaderText) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("\xFF")), "safetensors.utf8", "0xFF");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{")), "safetensors.json", "not valid JSON");
  EXPECT_QLM_ERROR(parse(raw_safetensors("[1,2]")), "safetensors.not_object", "found array");
  EXPECT_QLM_ERROR(parse(raw_safetensors("\"text\"")), "safetensors.not_object", "found string");
  EXPECT_QLM_ERROR(parse(raw_safetensors("42")), "safetensors.not_object", "found unsigned integer");
  EXPECT_QLM_ERROR(parse(raw_safetensors("garbage{}")), "safetensors.json", "not valid JSON");
  EXPECT_QLM_ERROR(parse(raw_safetensors(std::string("{}\0\0\0\0\0\0", 8))), "safetensors.json",
                   "NUL byte at header offset 2");
  EXPECT_QLM_ERROR(parse(raw_safetensors(std::string("\0{}", 3))), "safetensors.json", "NUL byte at header offset 0");
  const std::string bomb = R"({"__metadata__":{"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_QLM_ERROR(parse(raw_safetensors(bomb)), "safetensors.too_deep", "deeper than 64 levels");
  // 100 MB of whitespace: alone it is not JSON; around "{}" it is legal padding.
  EXPECT_QLM_ERROR(parse(raw_safetensors(std::string(kMaxHeaderBytes, ' '))), "safetensors.json",
                   "empty or only whitespace");
  std::string padded = "{}";
  padded.resize(kMaxHeaderBytes, ' ');
  EXPECT_TRUE(parse(raw_safetensors(padded)).tensors().empty());
}

TEST(SafetensorsCorpus, Item04_Metadata) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(R"({"__metadata__":{"format":["pt"]}})")), "safetensors.metadata",
                   "value 'format' must be a string, found array");
  EXPECT_QLM_ERROR(parse(raw_safetensors(R"({"__metadata__":"pt"})")), "safetensors.metadata",
                   "must be an object of string values, found string");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("__metadata__", "F32", "[2]", "[0,8]")), zeros(8))),
                   "safetensors.metadata", "reserved for string metadata and can never be a tensor name");
}

TEST(SafetensorsCorpus, Item05_EntryFields) {
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"shape":[2],"data_offsets":[0,8]})")), "safetensors.entry",
                   "missing the required field 'dtype'");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"F32","data_offsets":[0,8]})")), "safetensors.entry",
                   "missing the required field 'shape'");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"F32","shape":[2]})")), "safetensors.entry",
                   "missing the required field 'data_offsets'");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]})")),
                   "safetensors.entry", "unexpected field 'strides'");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"([1,2])")), "safetensors.entry", "must be an object");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"("F32")")), "safetensors.entry", "found string");
}

TEST(SafetensorsCorpus, Item06_Dtype) {
  for (const char* bad : {"F128", "f16", "Q4_0", "", "bf16"})
    EXPECT_QLM_ERROR(parse(with_entry_body(fmt::format(R"({{"dtype":"{}","shape":[2],"data_offsets":[0,8]}})", bad))),
                     "safetensors.dtype", fmt::format("unknown dtype \"{}\"", bad));
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":32,"shape":[2],"data_offsets":[0,8]})")), "safetensors.dtype",
                   "dtype must be a string, found unsigned integer");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":null,"shape":[2],"data_offsets":[0,8]})")), "safetensors.dtype",
                   "found null");
}

TEST(SafetensorsCorpus, Item07_Shape) {
  EXPECT_QLM_ERROR(parse(with_shape("[-1]")), "safetensors.shape", "found negative integer -1");
  EXPECT_QLM_ERROR(parse(with_shape("[1.0,2]")), "safetensors.shape", "shape[0] must be a non-negative JSON integer, found float");
  EXPECT_QLM_ERROR(parse(with_shape("[1e3]")), "safetensors.shape", "found float");
  EXPECT_QLM_ERROR(parse(with_shape("[2,281474976710656]")), "safetensors.shape", "shape[1] = 281474976710656 exceeds");
  EXPECT_QLM_ERROR(parse(with_shape("[18446744073709551616]")), "safetensors.shape", "found float");  // > u64
  EXPECT_QLM_ERROR(parse(with_shape(R"(["2"])")), "safetensors.shape", "found string \"2\"");
  EXPECT_QLM_ERROR(parse(with_shape("[1e400]")), "safetensors.json", "number overflow");  // found by fuzzing
  EXPECT_QLM_ERROR(parse(with_shape("[[2]]")), "safetensors.shape", "found array [2]");
  EXPECT_QLM_ERROR(parse(with_shape("[true]")), "safetensors.shape", "found boolean");
  EXPECT_QLM_ERROR(parse(with_shape("2")), "safetensors.shape", "shape must be an array");
  EXPECT_QLM_ERROR(parse(with_shape("[65536,65536,65536,65536,2]")), "safetensors.overflow", "overflows 64 bits");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"C64","shape":[281474976710655,65536],"data_offsets":[0,8]})")),
                   "safetensors.overflow", "x 64 bits (C64) overflows");
}

TEST(SafetensorsCorpus, Item08_SubByteAlignment) {
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"F4","shape":[5],"data_offsets":[0,3]})", 3)),
                   "safetensors.sub_byte", "20 bits");
  EXPECT_QLM_ERROR(parse(with_entry_body(R"({"dtype":"F6_E3M2","shape":[2,3],"data_offsets":[0,5]})", 5)),
                   "safetensors.sub_byte", "6 elements of F6_E3M2 (6 bits each) are 36 bits");
  EXPECT_EQ(parse(with_entry_body(R"({"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]})", 3)).info("w").nbytes(), 3u);
  EXPECT_EQ(parse(with_entry_body(R"({"dtype":"F4","shape":[2,1],"data_offsets":[0,1]})", 1)).info("w").nbytes(), 1u);
}

TEST(SafetensorsCorpus, Item09_DataOffsets) {
  EXPECT_QLM_ERROR(parse(with_offsets("[8,0]")), "safetensors.offsets", "begin 8 is greater than end 0");
  EXPECT_QLM_ERROR(parse(with_offsets("[0,4]")), "safetensors.offsets", "span 4 bytes, but F32[2] needs 8");
  EXPECT_QLM_ERROR(parse(with_offsets("[0,12]")), "safetensors.offsets", "span 12 bytes, but F32[2] needs 8");
  EXPECT_QLM_ERROR(parse(with_offsets("[8]")), "safetensors.offsets", "found [8]");
  EXPECT_QLM_ERROR(parse(with_offsets("[0,4,8]")), "safetensors.offsets", "found [0,4,8]");
  EXPECT_QLM_ERROR(parse(with_offsets("[-8,0]")), "safetensors.offsets", "data_offsets[0] (begin) must be a non-negative JSON integer, found negative integer");
  EXPECT_QLM_ERROR(parse(with_offsets("[0.0,8.0]")), "safetensors.offsets", "found float");
  EXPECT_QLM_ERROR(parse(with_offsets(R"({"begin":0,"end":8})")), "safetensors.offsets", "must be an array [begin, end]");
}

TEST(SafetensorsCorpus, Item10_Layout) {
  auto two = [](std::string_view a_offsets, std::string_view b_offsets) {
    return object(entry("a", "F32", "[2]", a_offsets) + "," + entry("b", "F32", "[2]", b_offsets));
  };
  EXPECT_QLM_ERROR(parse(raw_safetensors(two("[8,16]", "[16,24]"), zeros(24))), "safetensors.gap_or_overlap",
                   "starts at byte 8 of the data buffer, expected 0");
  EXPECT_QLM_ERROR(parse(raw_safetensors(two("[0,8]", "[12,20]"), zeros(20))), "safetensors.gap_or_overlap", "gap of 4 bytes");
  const std::string overlap =
      object(entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[3]", "[4,16]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(overlap, zeros(16))), "safetensors.gap_or_overlap",
                   "overlap: this tensor [4, 16] overlaps 'a' [0, 8]");
  EXPECT_QLM_ERROR(parse(raw_safetensors(two("[0,8]", "[0,8]"), zeros(8))), "safetensors.gap_or_overlap",
                   "aliasing: this tensor and 'a' claim the same bytes [0, 8]");
  // Allocation amplification: a thousand names on one byte range.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += (i ? "," : "") + entry(fmt::format("t{:04}", i), "F32", "[2]", "[0,8]");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(many), zeros(8))), "safetensors.gap_or_overlap", "aliasing");
}

TEST(SafetensorsCorpus, Item11_TruncationAndTrailingData) {
  const std::string header = object(entry("w", "F32", "[2]", "[0,8]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[1024]", "[0,4096]")), zeros(100))),
                   "safetensors.coverage", "truncated");
  EXPECT_QLM_ERROR(parse(raw_safetensors(header, zeros(8) + "extra_bogus_data_for_polyglot_file")),
                   "safetensors.coverage", "34 trailing bytes");
  EXPECT_QLM_ERROR(parse(raw_safetensors(header, zeros(8) + std::string("PK\x03\x04\x14\0\0\0", 8))),
                   "safetensors.coverage", "polyglot");
  EXPECT_QLM_ERROR(parse(raw_safetensors(header, zeros(8) + "\x80\x04\x95\x10\0\0\0\0\0\0\0}\x94.")),
                   "safetensors.coverage", "trailing bytes");
}

TEST(SafetensorsCorpus, Item12_Names) {
  const std::string dup = object(entry("a", "F32", "[1]", "[0,4]") + "," + entry("a", "F32", "[1]", "[4,8]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(dup, zeros(8))), "safetensors.duplicate_key", "duplicate tensor name 'a'");
  // The same key written with an escape is still a duplicate.
  const std::string escaped = object(entry("a", "F32", "[1]", "[0,4]") + "," + entry("\\u0061", "F32", "[1]", "[4,8]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(escaped, zeros(8))), "safetensors.duplicate_key", "'a'");
  EXPECT_QLM_ERROR(parse(raw_safetensors(R"({"w":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}})", zeros(8))),
                   "safetensors.duplicate_key", "duplicate key 'dtype' inside 'w'");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("bad\\x", "F32", "[2]", "[0,8]")), zeros(8))), "safetensors.json",
                   "not valid JSON");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("\\ud800", "F32", "[2]", "[0,8]")), zeros(8))), "safetensors.json",
                   "surrogate");
  // Odd but harmless names are kept verbatim (they are never used as paths).
  const std::string long_name(100000, 'n');
  const std::string odd = object(entry("", "F32", "[1]", "[0,4]") + "," + entry("../../etc/passwd", "F32", "[1]", "[4,8]") +
                                 "," + entry(long_name, "F32", "[1]", "[8,12]"));
  const std::string image = raw_safetensors(odd, zeros(12));
  SafetensorsFile file = parse(image);
  EXPECT_NE(file.find(""), nullptr);
  EXPECT_NE(file.find("../../etc/passwd"), nullptr);
  EXPECT_NE(file.find(long_name), nullptr);
}

TEST(SafetensorsCorpus, Item13_ZeroSizeAndScalarTensorsLoad) {
  const std::string header = object(entry("empty", "F32", "[0,4096]", "[0,0]") + "," + entry("scalar", "F32", "[]", "[0,4]") +
                                    "," + entry("empty2", "BF16", "[3,0]", "[4,4]") + "," +
                                    entry("huge_but_empty", "F64", "[281474976710655,281474976710655,0]", "[4,4]"));
  const float one = 1.0f;
  const std::string image = raw_safetensors(header, std::string_view(reinterpret_cast<const char*>(&one), 4));
  SafetensorsFile file = parse(image);
  EXPECT_EQ(file.tensor("empty").numel(), 0);
  EXPECT_EQ(file.tensor("empty2").shape(), (Shape{3, 0}));
  Tensor scalar = file.tensor("scalar");
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item_as_double({}), 1.0);
}

TEST(SafetensorsCorpus, Item14_MisalignedDataSection) {
  // No padding: header length 61 puts the data at file offset 69.
  const std::string header = object(entry("a", "F64", "[1]", "[0,8]") + "," + entry("b", "I32", "[1]", "[8,12]"));
  const double a = 0.125;
  const int32_t b = -7;
  std::string data(reinterpret_cast<const char*>(&a), 8);
  data.append(reinterpret_cast<const char*>(&b), 4);
  const std::string image = raw_safetensors(header, data);
  ASSERT_NE((8 + header.size()) % 8, 0u);
  SafetensorsFile file = parse(image);
  EXPECT_EQ(file.tensor("a").span<double>()[0], 0.125);
  EXPECT_EQ(file.tensor("b").span<int32_t>()[0], -7);
  EXPECT_FALSE(file.tensor("a").is_borrowed());
}

}  // namespace
}  // namespace qlm::io
