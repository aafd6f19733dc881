// The cpu_fast layout of WNA16 weights, shared by GPTQ, AWQ and compressed-tensors (all arrive in
// the standard form) and by every ISA.
//
// Rows are reordered by group (act-order: g_idx sorted, ties in input order) and each group is
// padded to a whole number of 32-bit words; packed row r reads input column row_source[r]
// (-1: padding, whose activation is 0). Columns are cut into tiles of kTileN.
//   codes   [tiles][words][kTileN] u32: word w of column c holds packed rows w*F .. w*F+F-1,
//           field j in bits [j*SB, (j+1)*SB), SB = storage bits (3-bit codes are stored in 4),
//           F = 32 / SB. One tile's words are contiguous, so a tile streams sequentially.
//   scales  [tiles][groups][kTileN] f32: 2^SB * s (exact).
//   zeros   [tiles][groups][kTileN] f32: 1 + z / 2^SB (exact); only with zero points, otherwise
//           every entry is sym_zero = 1 + bias / 2^SB (the format's implied zero).
// Decoding: f = as_float(0x3F800000 | code << (23 - SB)) = 1 + code / 2^SB exactly, and
//   W[k, n] = (f - zero) * scale = s * (code - z), where f - zero is exact: one rounding in all.
// Padded columns (n >= N) have code 0, scale 0 and zero 0.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "quant/wna16_weights.h"

namespace qlm {

inline constexpr int kTileN = 32;

struct PackedWna16 {
  int bits = 4;         // code bits of the format
  int storage_bits = 4; // SB: 2, 4 or 8
  int fields = 8;       // F = 32 / SB packed rows per word
  int64_t K = 0, N = 0;
  int64_t rows = 0;     // packed rows (K plus group padding) = words * F
  int64_t words = 0;
  int64_t tiles = 0;    // ceil(N / kTileN)
  int64_t groups = 0;
  bool has_zeros = false;
  float sym_zero = 0;  // 1 + bias / 2^SB
  AlignedBuffer<uint32_t> codes;
  AlignedBuffer<float> scales;
  AlignedBuffer<float> zeros;
  std::vector<int64_t> group_words;  // [groups + 1]: group g owns words [group_words[g], group_words[g+1])
  std::vector<int32_t> word_group;   // [words]
  std::vector<int32_t> row_source;   // [rows]; empty when packed row r is input column r for all r (rows == K)

  size_t weight_bytes() const { return codes.bytes() + scales.bytes() + zeros.bytes(); }
};

// Repacks checked standard-form weights (any bits 2/3/4/8, zero points, g_idx).
PackedWna16 pack_wna16(const WNA16Weights& w);

}  // namespace qlm
