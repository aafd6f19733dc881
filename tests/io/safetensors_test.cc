// One test per container rule R1-R18 (RELIABILITY.md §B.1), the container items 1-14 of the
// bad-input corpus (§B.5), and writer round trips. Every bad file is assembled from raw bytes.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/expect_error.h"
#include "support/raw_safetensors.h"
#include "support/temp_dir.h"

namespace qlm::io {
namespace {

using qlm::testing::as_bytes;
using qlm::testing::raw_safetensors;
using qlm::testing::TempDir;

SafetensorsFile parse(const std::string& image) { return SafetensorsFile::parse(as_bytes(image), "test.safetensors"); }

// A tensor entry as header text.
std::string entry(std::string_view name, std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":{}}})", name, dtype, shape, offsets);
}
std::string object(std::string_view members) { return fmt::format("{{{}}}", members); }
std::string zeros(size_t n) { return std::string(n, '\0'); }

// An F32[2] tensor "w" at [0, 8] followed by its 8 bytes: a valid file to vary one thing in.
const std::string kValidHeader = object(entry("w", "F32", "[2]", "[0,8]"));

TEST(SafetensorsRules, ValidMinimalFileParses) {
  const std::string image = raw_safetensors(kValidHeader, zeros(8));
  SafetensorsFile file = parse(image);
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.info("w").dtype, DType::F32);
  EXPECT_EQ(file.info("w").shape, (Shape{2}));
  EXPECT_EQ(file.header_size(), kValidHeader.size());
}

TEST(SafetensorsRules, R01_FileShorterThan8Bytes) {
  for (size_t n = 0; n < 8; ++n)
    EXPECT_QLM_ERROR(parse(std::string(n, '\x01')), "safetensors.too_small", fmt::format("has {} bytes", n));
}

TEST(SafetensorsRules, R02_HeaderLengthAboveLimitRejectedBeforeAllocating) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", 100'000'001)), "safetensors.header_too_large", "100000001");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", std::numeric_limits<uint64_t>::max())),
                   "safetensors.header_too_large", "18446744073709551615");
}

TEST(SafetensorsRules, R03_HeaderLongerThanFile) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", 3)), "safetensors.header_length", "re-download");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{}", "", 100'000'000)), "safetensors.header_length",
                   "needs a file of at least 100000008 bytes");
}

TEST(SafetensorsRules, R04_HeaderNotUtf8) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("{\"\xFF\":1}")), "safetensors.utf8", "0xFF at header offset 2");
  EXPECT_QLM_ERROR(parse(raw_safetensors("{\"\xC0\x80\":1}")), "safetensors.utf8", "0xC0");          // overlong
  EXPECT_QLM_ERROR(parse(raw_safetensors("{\"\xED\xA0\x80\":1}")), "safetensors.utf8", "0xED");      // surrogate
  EXPECT_QLM_ERROR(parse(raw_safetensors("{\"\xF4\x90\x80\x80\":1}")), "safetensors.utf8", "0xF4");  // > U+10FFFF
}

TEST(SafetensorsRules, R05_HeaderIsJsonObjectWithOnlyWhitespacePadding) {
  EXPECT_QLM_ERROR(parse(raw_safetensors("{")), "safetensors.json", "not valid JSON");
  EXPECT_QLM_ERROR(parse(raw_safetensors("[]")), "safetensors.not_object", "found array");
  EXPECT_QLM_ERROR(parse(raw_safetensors("x{}")), "safetensors.json", "not valid JSON");
  const std::string padded = raw_safetensors(" \t\r\n" + kValidHeader + "  \n\t\r", zeros(8));
  EXPECT_EQ(parse(padded).tensors().size(), 1u);
}

TEST(SafetensorsRules, R06_MetadataIsStringToStringAndReserved) {
  const std::string ok = raw_safetensors(object(R"("__metadata__":{"format":"pt"},)" + entry("w", "F32", "[2]", "[0,8]")),
                                         zeros(8));
  EXPECT_EQ(parse(ok).metadata().at("format"), "pt");
  EXPECT_QLM_ERROR(parse(raw_safetensors(R"({"__metadata__":{"n":1}})")), "safetensors.metadata",
                   "value 'n' must be a string, found unsigned integer 1");
}

TEST(SafetensorsRules, R07_EntryHasExactlyDtypeShapeOffsets) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[2]}})")), "safetensors.entry",
                   "missing the required field 'data_offsets'");
  EXPECT_QLM_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})", zeros(8))),
      "safetensors.entry", "unexpected field 'strides'");
}

TEST(SafetensorsRules, R08_DtypeIsAKnownExactName) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F128", "[2]", "[0,8]")), zeros(8))), "safetensors.dtype",
                   "unknown dtype \"F128\"");
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType dtype = static_cast<DType>(i);
    const std::string image = raw_safetensors(object(entry("w", dtype_name(dtype), "[8]", fmt::format("[0,{}]", dtype_bits(dtype)))),
                                              zeros(static_cast<size_t>(dtype_bits(dtype))));
    EXPECT_EQ(parse(image).info("w").dtype, dtype) << dtype_name(dtype);
  }
}

TEST(SafetensorsRules, R09_ShapeIsArrayOfNonNegativeIntegersUpTo2Pow48Minus1) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[-2]", "[0,8]")), zeros(8))), "safetensors.shape",
                   "shape[0] must be a non-negative JSON integer, found negative integer -2");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[281474976710656]", "[0,8]")), zeros(8))),
                   "safetensors.shape", "exceeds the maximum dimension 2^48-1");
  // The largest legal dimension passes R9 (and then fails R12 on its length).
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "U8", "[281474976710655]", "[0,8]")), zeros(8))),
                   "safetensors.offsets", "needs 281474976710655 bytes");
}

TEST(SafetensorsRules, R10_ElementAndBitCountsAreOverflowChecked) {
  EXPECT_QLM_ERROR(
      parse(raw_safetensors(object(entry("w", "F32", "[281474976710655,281474976710655]", "[0,8]")), zeros(8))),
      "safetensors.overflow", "element count of shape [281474976710655, 281474976710655] overflows");
  // (2^48-1) * 2^15 elements fit in 64 bits; times 64 bits each they do not.
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F64", "[281474976710655,32768]", "[0,8]")), zeros(8))),
                   "safetensors.overflow", "x 64 bits (F64) overflows");
}

TEST(SafetensorsRules, R11_SubByteTensorsEndOnAByteBoundary) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F4", "[3]", "[0,2]")), zeros(2))), "safetensors.sub_byte",
                   "3 elements of F4 (4 bits each) are 12 bits");
  const std::string ok = raw_safetensors(object(entry("w", "F4", "[4]", "[0,2]")), zeros(2));
  EXPECT_EQ(parse(ok).info("w").nbytes(), 2u);
}

TEST(SafetensorsRules, R12_DataOffsetsArePairMatchingTheTensorSize) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[2]", "[8,0]")), zeros(8))), "safetensors.offsets",
                   "begin 8 is greater than end 0");
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[2]", "[0,4]")), zeros(4))), "safetensors.offsets",
                   "span 4 bytes, but F32[2] needs 8 bytes");
}

TEST(SafetensorsRules, R13_OffsetsAreContiguousFromZeroWithoutGapOrOverlap) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(object(entry("w", "F32", "[2]", "[4,12]")), zeros(12))),
                   "safetensors.gap_or_overlap", "starts at byte 4 of the data buffer, expected 0");
  const std::string gap = object(entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(gap, zeros(12))), "safetensors.gap_or_overlap",
                   "gap of 4 bytes: this tensor starts at 8 but the previous tensor 'a' ends at 4");
}

TEST(SafetensorsRules, R14_BufferIsExactlyCovered) {
  EXPECT_QLM_ERROR(parse(raw_safetensors(kValidHeader, zeros(7))), "safetensors.coverage",
                   "the file is truncated: the header describes 8 bytes of tensor data");
  EXPECT_QLM_ERROR(parse(raw_safetensors(kValidHeader, zeros(9))), "safetensors.coverage",
                   "1 trailing bytes after the last tensor");
}

TEST(SafetensorsRules, R15_DuplicateKeysAreReportedAsSuch) {
  const std::string twice = object(entry("w", "F32", "[2]", "[0,8]") + "," + entry("w", "F32", "[2]", "[8,16]"));
  EXPECT_QLM_ERROR(parse(raw_safetensors(twice, zeros(16))), "safetensors.duplicate_key", "duplicate tensor name 'w'");
}

TEST(SafetensorsRules, R16_ValuesAreNotChecked) {
  const float values[2] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  const std::string image = raw_safetensors(kValidHeader, std::string_view(reinterpret_cast<const char*>(values), 8));
  SafetensorsFile file = parse(image);
  Tensor t = file.tensor("w");
  EXPECT_TRUE(std::isnan(t.span<float>()[0]));
  EXPECT_TRUE(std::isinf(t.span<float>()[1]));
}

TEST(SafetensorsRules, R17_MisalignedDataIsCopiedNotCast) {
  // A 9-byte header puts the data at file offset 17: misaligned for F32 in any buffer whose start
  // is 4-aligned (std::string storage is at least 8-aligned).
  const std::string header = object(entry("w", "F32", "[2]", "[0,8]"));
  const std::string padded = header + std::string((9 - header.size() % 8) % 8, ' ');
  ASSERT_NE((8 + padded.size()) % 4, 0u);
  const float values[2] = {1.5f, -2.25f};
  const std::string image = raw_safetensors(padded, std::string_view(reinterpret_cast<const char*>(values), 8));
  ASSERT_EQ(reinterpret_cast<uintptr_t>(image.data()) % 8, 0u);
  SafetensorsFile file = parse(image);
  Tensor t = file.tensor("w");
  EXPECT_FALSE(t.is_borrowed());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % alignof(float), 0u);
  EXPECT_EQ(t.span<float>()[0], 1.5f);
  EXPECT_EQ(t.span<float>()[1], -2.25f);

  // The aligned case borrows the mapping.
  const std::string aligned = std::string(kValidHeader) + std::string((8 - kValidHeader.size() % 8) % 8, ' ');
  const std::string aligned_image = raw_safetensors(aligned, std::string_view(reinterpret_cast<const char*>(values), 8));
  SafetensorsFile aligned_file = parse(aligned_image);
  EXPECT_TRUE(aligned_file.tensor("w").is_borrowed());
}

TEST(SafetensorsRules, R18_OpenMapsReadOnlyAndValidatesAgainstFileSize) {
  TempDir dir;
  EXPECT_QLM_ERROR(SafetensorsFile::open(dir.path()), "safetensors.io", "not a regular file");
  EXPECT_QLM_ERROR(SafetensorsFile::open(dir / "absent.safetensors"), "safetensors.io", "cannot open the file");
  const auto truncated = dir.write("t.safetensors", raw_safetensors(kValidHeader, zeros(4)));
  EXPECT_QLM_ERROR(SafetensorsFile::open(truncated), "safetensors.coverage", "t.safetensors");

  const float values[2] = {3.0f, 4.0f};
  const auto good = dir.write("g.safetensors", raw_safetensors(kValidHeader, std::string_view(reinterpret_cast<const char*>(values), 8)));
  Tensor kept;
  {
    SafetensorsFile file = SafetensorsFile::open(good);
    EXPECT_EQ(file.file_size(), std::filesystem::file_size(good));
    auto span = file.data(file.info("w"));
    EXPECT_EQ(span.size(), 8u);
    kept = file.tensor("w");
  }
  // The tensor keeps the mapping alive after the file object is gone.
  EXPECT_EQ(kept.to_float_vector(), (std::vector<float>{3.0f, 4.0f}));
}

TEST(SafetensorsRules, ErrorsNameFileTensorAndCarryContext) {
  try {
    parse(raw_safetensors(object(entry("model.layers.0.weight", "F32", "[2]", "[0,4]")), zeros(4)));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.context().file, "test.safetensors");
    EXPECT_EQ(e.context().tensor, "model.layers.0.weight");
    EXPECT_FALSE(e.remedy().empty());
  }
}

TEST(SafetensorsRules, MissingTensorLookup) {
  const std::string image = raw_safetensors(kValidHeader, zeros(8));
  SafetensorsFile file = parse(image);
  EXPECT_EQ(file.find("nope"), nullptr);
  EXPECT_QLM_ERROR(file.info("nope"), "safetensors.missing_tensor", "'nope'");
}

}  // namespace
}  // namespace qlm::io
