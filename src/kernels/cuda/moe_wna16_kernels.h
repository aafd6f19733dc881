// Grouped WNA16 mixture-of-experts kernels (plain launchers): every expert's w13 / w2 in the
// `cuda_wna16` layout (wna16_layout.h), addressed through a device table of Wna16DeviceWeights
// indexed by expert id. Each launch covers all experts: a block finds its expert and its rows from
// the device-side offsets written by launch_moe_align (runtime/ops/cuda/moe_launch.h), so nothing
// waits for the host. Rows are slots in expert order; row r of expert e has F32 activations
// xf[r, j] in e's packed-row order (row_source), `stride` floats per row.
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
  int64_t rows_total = 0;                 // slots
  int tile_m = 1;                         // 1, 2, 4 or 8
};

// xf[r, j] = x[row_token[r], row_source_e[j]] as f32 (0 for padding and j past e's rows); x [T, K] in `act`.
// One thread per element; cudaErrorInvalidValue for more than INT32_MAX rows or a stride outside 1 .. 65535 * 256
// (the same limits for launch_moe_wna16_silu_gather).
cudaError_t launch_moe_wna16_gather(const void* x, Wna16Act act, int64_t K, const int32_t* row_token,
                                    const MoeWna16Experts& ex, int64_t stride, float* xf, cudaStream_t stream);

// partial[s, r, n] = sum over split s's chunks of xf[r, j] * W_e[j, n] for n < N (every expert's N):
// grid (ceil(N_pad / kGemvColumns), max_tiles, splits); tiles past tile_offsets[E] exit at once.
cudaError_t launch_moe_wna16_gemm(const MoeWna16Experts& ex, int bits, int64_t N, int64_t N_pad, int64_t max_tiles,
                                  const float* xf, int64_t stride, int splits, int64_t chunks_per_warp, float* partial,
                                  cudaStream_t stream);

// w2's input from w13's split partials [splits, rows, 2 * width] (gate | up):
// af[r, j] = silu(g) * u at column row_source2_e[j] (0 for padding), `stride` floats per row.
cudaError_t launch_moe_wna16_silu_gather(const float* partial, int splits, int64_t width, const MoeWna16Experts& w2,
                                         int64_t stride, float* af, cudaStream_t stream);

}  // namespace qlm::cuda
