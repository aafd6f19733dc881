// A fast non-cryptographic 64-bit checksum over byte streams (four independent multiply-rotate
// lanes over 8-byte words, so it runs near memory bandwidth). Detects corruption, not tampering.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace qlm::io {

class StreamChecksum {
 public:
  explicit StreamChecksum(uint64_t seed = 0);
  // The result depends only on the concatenated bytes, not on how they are split across calls.
  void update(std::span<const std::byte> bytes);
  uint64_t digest() const;

 private:
  void consume_stripe(const std::byte* stripe);  // 32 bytes
  std::array<uint64_t, 4> lanes_;
  std::array<std::byte, 32> pending_{};
  size_t pending_size_ = 0;
  uint64_t total_ = 0;
  uint64_t seed_;
};

uint64_t checksum64(std::span<const std::byte> bytes, uint64_t seed = 0);

}  // namespace qlm::io
