// The device layout of the `cuda_wna16` kernel, built on the host from the WNA16 standard form.
// Plain C++ (no CUDA): built in every build so the repacking can be tested without a GPU.
//
// Rows (input features) are reordered by group (act-order: g_idx sorted, ties in input order) and
// every group is padded with empty rows to a whole number of chunks. A chunk is kRows consecutive
// packed rows whose codes of one column fill exactly kWords 32-bit words: 16 x 2-bit, 32 x 3-bit
// (3 words, fields straddle words as in GPTQ), 8 x 4-bit or 4 x 8-bit. Hence every chunk lies in
// exactly one group.
//   codes       [chunks * kWords, N_pad] u32: column n's codes form one little-endian bit stream
//               along the packed rows (packed row j at bit j * bits), as in GPTQ's qweight.
//   scales      [groups, N_pad] f32, exact copies.
//   zeros       [groups, N_pad] u8 true zero points (empty when the format has none; the implied
//               zero is then `implied_zero`).
//   row_source  [rows]: input row of packed row j, -1 for padding (whose activation is 0).
//   chunk_group [chunks]: the group of every row of the chunk.
// Columns n >= N (padding to N_pad, a multiple of kColumnAlign) have code 0 and scale 0.
// When no rows move (no act-order, groups whole chunks) the codes are GPTQ's words unchanged;
// bits past row K in the last chunk may then be anything: their activation is 0 and the
// dequantizer skips them.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/wna16_weights.h"

namespace qlm {

// Codes-per-chunk and words-per-chunk of a bit width (2, 3, 4 or 8).
constexpr int cuda_wna16_chunk_words(int bits) { return bits == 3 ? 3 : 1; }
constexpr int cuda_wna16_chunk_rows(int bits) { return cuda_wna16_chunk_words(bits) * 32 / bits; }

struct CudaWna16Layout {
  static constexpr int64_t kColumnAlign = 8;  // 16-byte vectors of 4 columns; 16-bit rows 16-byte aligned
  int bits = 4;
  int implied_zero = 0;  // weight_type.bias, used when zeros is empty
  int64_t K = 0, N = 0, N_pad = 0;
  int64_t rows = 0;  // packed rows = chunks * chunk_rows (K plus padding)
  int64_t chunks = 0;
  int64_t groups = 0;
  std::vector<uint32_t> codes;
  std::vector<float> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> row_source;
  std::vector<int32_t> chunk_group;
};

// Repacks standard-form weights (checked first; throws kernel.weights naming the bad tensor).
CudaWna16Layout pack_cuda_wna16(const WNA16Weights& w);

// True when the chunks come in whole aligned quads (chunks % 4 == 0) and every quad lies in one group: the tensor-core
// MoE GEMM (launch_moe_wna16_mma) applies a group's scales once per quad of chunks. Holds for 4-bit weights whose
// every group has a multiple of 32 rows (with or without act-order), e.g. group sizes 32 / 64 / 128, or one group
// over a K that is a multiple of 32.
bool cuda_wna16_groups_in_quads(const CudaWna16Layout& layout);

// Code of packed row j, column n (for tests and host-side checks).
uint32_t cuda_wna16_code(const CudaWna16Layout& layout, int64_t j, int64_t n);

}  // namespace qlm
