// The device layout of `cuda_wna16_fast` (tensor-core W4A16 / W8A16), built on the host from the WNA16
// standard form. Plain C++ (no CUDA): built everywhere so the repacking is testable without a GPU.
//
// The kernel computes y^T = W^T x^T with mma.sync m16n8k16: the dequantized weights are the A operand
// (16 output columns x 16 input rows per tile), the activations the B operand (8 tokens per tile).
//
// Rows. Input rows are placed group by group (act-order: g_idx order, ties in input order); every
// group gets the same number of packed rows, rows_per_group = max rows of a group rounded up to 16,
// padding rows have row_source -1 (activation 0). So k-tile t (16 packed rows) lies in group
// t / tiles_per_group. When no row moves (identity) the kernel reads x directly, else a small kernel
// gathers x into [M, rows] first.
//
// Inside a k-tile, lane (g = lane / 4, t = lane % 4) of a warp owns packed rows 4t..4t+3 (the MMA's
// k positions 2t, 2t+1, 2t+8, 2t+9 mapped onto 4 consecutive rows, so its B fragment is one 8-byte
// load) and columns g and g + 8 of each 16-column tile. Its A registers a0..a3 are the pairs
//   a_p = (row 4t + 2*(p/2), row 4t + 2*(p/2) + 1) of column g + 8*(p%2).
// Codes: [n_blocks][k_tiles][vectors][32 lanes][4 u32], a block being 64 columns (4 tiles of 16):
//   4-bit: 1 vector; u32 j is tile j; pair p's codes are nibbles p (first row) and p + 4 (second).
//   8-bit: 2 vectors; vector v u32 u is tile 2v + u/2, word u%2 holds pairs 2(u%2) and 2(u%2)+1;
//          pair p's codes are bytes p%2 (first row) and p%2 + 2 (second).
// Scales/zeros: [groups][n_blocks][8 (g)][8 u16], entry 2j + r = column 64b + 16j + g + 8r, in the
// activation dtype (f16 or bf16 bits). Scales are rounded to that dtype; zeros are stored as
// zero_base + z (exact), zero_base being what the kernel's magic-number conversion adds to a code:
// 1024 (f16), 128 (bf16, 4-bit), 0 (bf16, 8-bit, converted through f32). Symmetric weights store no
// zeros: zero_const is the u16 pair of zero_base + weight_type.bias.
// Columns >= N have scale 0 and code 0.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/wna16_weights.h"

namespace qlm {

struct Wna16FastLayout {
  static constexpr int64_t kBlockN = 64;
  static constexpr int64_t kTileK = 16;
  int bits = 4;
  bool bf16 = true;
  int64_t K = 0, N = 0, N_pad = 0, n_blocks = 0;
  int64_t groups = 0, rows_per_group = 0, rows = 0, k_tiles = 0, tiles_per_group = 0;
  bool identity_rows = false;  // row_source[j] == j for every j and rows == K
  int zero_base = 0;
  uint32_t zero_const = 0;     // symmetric: u16 pair (zero_base + bias) in the act dtype
  std::vector<uint32_t> codes;
  std::vector<uint16_t> scales;
  std::vector<uint16_t> zeros;  // empty: symmetric
  std::vector<int32_t> row_source;
  int vectors() const { return bits / 4; }
};

// Repacks standard-form weights for activations in F16 (bf16 = false) or BF16. Checks the inputs
// (throws kernel.weights naming the bad tensor).
Wna16FastLayout pack_wna16_fast(const WNA16Weights& w, bool bf16);

// Host-side readers of the layout (tests): code of packed row j, column n; scale and zero of
// group g, column n (zero as the integer zero point, implied zero for symmetric layouts).
uint32_t wna16_fast_code(const Wna16FastLayout& L, int64_t j, int64_t n);
float wna16_fast_scale(const Wna16FastLayout& L, int64_t g, int64_t n);
int wna16_fast_zero(const Wna16FastLayout& L, int64_t g, int64_t n);
// f16 / bf16 bits <-> float (round to nearest even), host side.
uint16_t wna16_fast_to_half_bits(float v, bool bf16);
float wna16_fast_from_half_bits(uint16_t h, bool bf16);

}  // namespace qlm
