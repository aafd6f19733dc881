// verify_checkpoint_data reads every tensor byte and fingerprints each file; the checksum is
// independent of how the stream is split.
#include "io/verify.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "io/checksum.h"
#include "support/temp_dir.h"

namespace qlm::io {
namespace {

using qlm::testing::TempDir;

TEST(CheckpointVerify, ChecksumDoesNotDependOnChunking) {
  std::vector<std::byte> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 131 + 7);
  const uint64_t whole = checksum64(bytes);
  for (size_t split : {1u, 7u, 31u, 32u, 33u, 500u, 999u}) {
    StreamChecksum sum;
    for (size_t offset = 0; offset < bytes.size(); offset += split)
      sum.update(std::span(bytes).subspan(offset, std::min(split, bytes.size() - offset)));
    EXPECT_EQ(sum.digest(), whole) << split;
  }
  // Sensitive to every byte, to length, and to order.
  auto flipped = bytes;
  flipped[517] ^= std::byte{1};
  EXPECT_NE(checksum64(flipped), whole);
  EXPECT_NE(checksum64(std::span(bytes).first(999)), whole);
  EXPECT_NE(checksum64(std::vector<std::byte>(32)), checksum64(std::vector<std::byte>(33)));
}

TEST(CheckpointVerify, ReadsEveryByteAndDetectsChanges) {
  TempDir dir;
  std::vector<float> values(100000);
  std::iota(values.begin(), values.end(), 0.0f);
  write_safetensors(dir / "model.safetensors", {{"a", Tensor::from_vector(values, {100000})},
                                                {"b", Tensor::from_vector<int32_t>({1, 2, 3}, {3})},
                                                {"empty", Tensor::zeros({0}, DType::F16)}});
  uint64_t last_done = 0, last_total = 0;
  VerifyReport report = verify_checkpoint_data(Checkpoint::open(dir.path()), [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  EXPECT_EQ(report.bytes, 400012u);
  EXPECT_EQ(last_done, report.bytes);
  EXPECT_EQ(last_total, report.bytes);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_EQ(report.files[0].bytes, 400012u);
  EXPECT_GE(report.seconds, 0.0);

  // Same data, same checksum; one changed byte, a different one.
  EXPECT_EQ(verify_checkpoint_data(Checkpoint::open(dir.path())).files[0].checksum, report.files[0].checksum);
  {
    std::fstream file(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-5, std::ios::end);
    file.put('\x7f');
  }
  EXPECT_NE(verify_checkpoint_data(Checkpoint::open(dir.path())).files[0].checksum, report.files[0].checksum);
}

}  // namespace
}  // namespace qlm::io
