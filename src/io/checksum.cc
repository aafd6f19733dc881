#include "io/checksum.h"

#include <bit>
#include <cstring>

namespace qlm::io {
namespace {

// Odd 64-bit constants with well-mixed bits (large primes).
constexpr uint64_t kPrimeA = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrimeB = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrimeC = 0x165667B19E3779F9ull;

inline uint64_t load_u64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // unaligned-safe; the checksum is defined on little-endian words
  return v;
}

inline uint64_t mix_word(uint64_t lane, uint64_t word) {
  lane += word * kPrimeB;
  lane = std::rotl(lane, 31);
  return lane * kPrimeA;
}

inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrimeB;
  h ^= h >> 29;
  h *= kPrimeC;
  h ^= h >> 32;
  return h;
}

}  // namespace

StreamChecksum::StreamChecksum(uint64_t seed)
    : lanes_{seed + kPrimeA + kPrimeB, seed + kPrimeB, seed, seed - kPrimeA}, seed_(seed) {}

void StreamChecksum::consume_stripe(const std::byte* stripe) {
  for (size_t i = 0; i < 4; ++i) lanes_[i] = mix_word(lanes_[i], load_u64(stripe + 8 * i));
}

void StreamChecksum::update(std::span<const std::byte> bytes) {
  total_ += bytes.size();
  const std::byte* p = bytes.data();
  size_t n = bytes.size();
  if (pending_size_ > 0) {
    const size_t take = std::min(n, pending_.size() - pending_size_);
    std::memcpy(pending_.data() + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    n -= take;
    if (pending_size_ < pending_.size()) return;
    consume_stripe(pending_.data());
    pending_size_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32) consume_stripe(p);
  if (n > 0) std::memcpy(pending_.data(), p, n);
  pending_size_ = n;
}

uint64_t StreamChecksum::digest() const {
  uint64_t h = std::rotl(lanes_[0], 1) + std::rotl(lanes_[1], 7) + std::rotl(lanes_[2], 12) + std::rotl(lanes_[3], 18);
  for (uint64_t lane : lanes_) h = (h ^ mix_word(0, lane)) * kPrimeA + kPrimeC;
  h += total_;
  size_t i = 0;
  for (; i + 8 <= pending_size_; i += 8) h = std::rotl(h ^ mix_word(0, load_u64(pending_.data() + i)), 27) * kPrimeA + kPrimeC;
  for (; i < pending_size_; ++i) h = std::rotl(h ^ (static_cast<uint64_t>(pending_[i]) * kPrimeC), 11) * kPrimeA;
  return avalanche(h ^ seed_);
}

uint64_t checksum64(std::span<const std::byte> bytes, uint64_t seed) {
  StreamChecksum sum(seed);
  sum.update(bytes);
  return sum.digest();
}

}  // namespace qlm::io
