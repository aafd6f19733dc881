// Grouped WNA16 mixture-of-experts kernels (plain launchers): every expert's w13 / w2 in the
// `cuda_wna16` layout (wna16_layout.h), addressed through a device table of Wna16DeviceWeights
// indexed by expert id. Each launch covers all experts: a block finds its expert and its rows from
// the device-side offsets and experts of rows and tiles written by launch_moe_align
// (runtime/ops/cuda/moe_launch.h), so nothing waits for the host. Rows are slots in expert order; row r of expert e has
// F32 activations xf[r, j] in e's packed-row order (row_source), `stride` floats per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/wna16_kernels.h"

namespace qlm::cuda {

struct MoeWna16Experts {
  const Wna16DeviceWeights* table = nullptr;  // device array [num_experts]
  int num_experts = 0;
  const int32_t* offsets = nullptr;       // [num_experts + 1] rows per expert
  const int32_t* tile_offsets = nullptr;  // [num_experts + 1] tiles of tile_m rows per expert
  const int32_t* row_expert = nullptr;    // [rows_total] the expert of every row
  const int32_t* tile_expert = nullptr;   // [grid's tiles] the expert of every tile (below tile_offsets[num_experts])
  int64_t rows_total = 0;                 // slots
  int tile_m = 1;                         // GEMV: 1, 2, 4 or 8; MMA: 8, 16 or 32
};

// Rows of the activations the grouped GEMMs read: `stride` elements per row, element j of row r (expert e) is
//   out F32 (launch_moe_wna16_gemm's order): packed row j of e;
//   out BF16 / F16 (launch_moe_wna16_mma's order): packed row 8c + (0, 4, 1, 5, 2, 6, 3, 7)[i] at j = 8c + i, so
//     one 16-byte load gives a lane the four (k, k + 4) pairs of its chunk that its MMA fragments take;
// 0 for padding rows and packed rows past e's. The 16-bit orders need stride % 8 == 0.
// xf[r, j] = x[row_token[r], row_source_e[packed row]] rounded to `out`; x [T, K] in `act`. One thread per element;
// cudaErrorInvalidValue for more than INT32_MAX rows or a stride outside 1 .. 65535 * 256 (the same limits for
// launch_moe_wna16_silu_gather).
cudaError_t launch_moe_wna16_gather(const void* x, Wna16Act act, int64_t K, const int32_t* row_token,
                                    const MoeWna16Experts& ex, int64_t stride, Wna16Act out, void* xf,
                                    cudaStream_t stream);

// partial[s, r, n] = sum over split s's chunks of xf[r, j] * W_e[j, n] for n < N (every expert's N), xf F32:
// grid (ceil(N_pad / kGemvColumns), max_tiles, splits); tiles past tile_offsets[E] exit at once.
cudaError_t launch_moe_wna16_gemm(const MoeWna16Experts& ex, int bits, int64_t N, int64_t N_pad, int64_t max_tiles,
                                  const float* xf, int64_t stride, int splits, int64_t chunks_per_warp, float* partial,
                                  cudaStream_t stream);

// The same partial sums on tensor cores (mma.sync m16n8k16, compute capability >= 8.0) for 4-bit experts whose
// groups are runs of whole aligned quads of chunks (cuda_wna16_groups_in_quads): xb in `act` (BF16 or F16) in the
// MMA order above; tile_m 8, 16 or 32; split s covers chunks [s * chunks_per_split, ...), chunks_per_split a
// multiple of 4. Weights are the MMA's A operand (16 output columns x 16 k), 8 rows of the tile its B operand;
// zero points are subtracted exactly in the act dtype and scales applied in F32 once per group.
// Grid (ceil(N_pad / kMoeMmaColumns), max_tiles, splits).
constexpr int kMoeMmaColumns = 128;
// Blocks along N of launch_moe_wna16_mma's grid (its x dimension).
constexpr int64_t moe_mma_column_blocks(int64_t N_pad) { return (N_pad + kMoeMmaColumns - 1) / kMoeMmaColumns; }
cudaError_t launch_moe_wna16_mma(const MoeWna16Experts& ex, Wna16Act act, int64_t N, int64_t N_pad, int64_t max_tiles,
                                 const void* xb, int64_t stride, int splits, int64_t chunks_per_split, float* partial,
                                 cudaStream_t stream);

// w2's input from w13's split partials [splits, rows, 2 * width] (gate | up): af[r, j] = silu(g) * u at the packed
// row of element j (the orders above, by `out`), `stride` elements per row.
cudaError_t launch_moe_wna16_silu_gather(const float* partial, int splits, int64_t width, const MoeWna16Experts& w2,
                                         int64_t stride, Wna16Act out, void* af, cudaStream_t stream);

}  // namespace qlm::cuda
