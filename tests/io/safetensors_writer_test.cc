// Writer round trips: every dtype (sub-byte, FP8, BF16 included), rank 0, zero size, metadata,
// alignment of every tensor, and the writer's own refusals.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::io {
namespace {

using qlm::testing::TempDir;

// A tensor whose bytes are a recognisable pattern derived from `seed`.
Tensor patterned(Shape shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  for (size_t i = 0; i < t.nbytes(); ++i) t.raw_data()[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(seed) * 7 + 1) & 0xFF);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::vector<std::pair<std::string, Tensor>> every_dtype() {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    // 12 elements end on a byte boundary for every width (4 and 6 bits included).
    tensors.emplace_back(fmt::format("t.{}", dtype_name(dtype)), patterned({3, 4}, dtype, i));
  }
  tensors.emplace_back("scalar", patterned({}, DType::F32, 50));
  tensors.emplace_back("empty", Tensor::zeros({0, 7}, DType::BF16));
  tensors.emplace_back("odd_f16", patterned({3}, DType::F16, 51));  // 6 bytes: would misalign what follows
  return tensors;
}

TEST(SafetensorsWriter, RoundTripsEveryDtypeRankZeroZeroSizeAndMetadata) {
  const auto tensors = every_dtype();
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "ünïcode ✓"}};
  const std::vector<std::byte> image = serialize_safetensors(tensors, metadata);
  SafetensorsFile file = SafetensorsFile::parse(image, "roundtrip");
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& [name, original] : tensors) {
    const TensorInfo& info = file.info(name);
    EXPECT_EQ(info.dtype, original.dtype()) << name;
    EXPECT_EQ(info.shape, original.shape()) << name;
    EXPECT_TRUE(same_bytes(file.tensor(name), original)) << name;
  }
}

TEST(SafetensorsWriter, HeaderIsPaddedAndEveryTensorIsAligned) {
  const std::vector<std::byte> image = serialize_safetensors(every_dtype());
  SafetensorsFile file = SafetensorsFile::parse(image, "aligned");
  EXPECT_EQ((8 + file.header_size()) % 8, 0u);
  for (const TensorInfo& info : file.tensors()) {
    const int bits = dtype_bits(info.dtype);
    const uint64_t alignment = bits % 8 == 0 ? static_cast<uint64_t>(bits / 8) : 1;
    EXPECT_EQ((8 + file.header_size() + info.begin) % alignment, 0u) << info.name;
  }
}

TEST(SafetensorsWriter, WritesNonContiguousTensorsContiguously) {
  Tensor matrix = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<std::byte> image = serialize_safetensors({{"t", matrix.transpose()}});
  SafetensorsFile file = SafetensorsFile::parse(image, "transposed");
  EXPECT_EQ(file.tensor("t").shape(), (Shape{3, 2}));
  EXPECT_EQ(file.tensor("t").to_float_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(SafetensorsWriter, FileRoundTripThroughMmap) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  const auto tensors = every_dtype();
  write_safetensors(path, tensors, {{"format", "pt"}});
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  for (const auto& [name, original] : tensors) EXPECT_TRUE(same_bytes(file.tensor(name), original)) << name;
  EXPECT_TRUE(file.tensor("t.F32").is_borrowed());
}

TEST(SafetensorsWriter, RefusesWhatTheReaderWouldReject) {
  Tensor t = Tensor::zeros({2}, DType::F32);
  EXPECT_QLM_ERROR(serialize_safetensors({{"a", t}, {"a", t}}), "safetensors.duplicate_key", "tensor name given twice");
  EXPECT_QLM_ERROR(serialize_safetensors({{"__metadata__", t}}), "safetensors.metadata", "reserved");
  EXPECT_QLM_ERROR(serialize_safetensors({{"bad\xFFname", t}}), "safetensors.utf8", "not valid UTF-8");
  EXPECT_QLM_ERROR(serialize_safetensors({{"u", Tensor()}}), "safetensors.write", "undefined tensor");
  TempDir dir;
  EXPECT_QLM_ERROR(write_safetensors(dir / "no/such/dir/x.safetensors", {{"a", t}}), "safetensors.write", "cannot create");
}

TEST(SafetensorsWriter, EmptyFileRoundTrips) {
  const std::vector<std::byte> image = serialize_safetensors({});
  SafetensorsFile file = SafetensorsFile::parse(image, "empty");
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

}  // namespace
}  // namespace qlm::io
