// The wgmma GEMM of `cuda_wna16_fast` for 4-bit weights on sm_90a (src/kernels/cuda/sm90a/wna16_wgmma.cu):
// y^T = W^T x^T with `wgmma.mma_async` m64nNk16, the dequantized weights the register A operand (one
// 16-row slice per warp, the v1 conversion), the tokens the shared-memory B operand (128-byte swizzle),
// N = 64 or 128 tokens per tile. Built with the other sm_90a kernels (when the CUTLASS headers are
// present, cmake/Cutlass.cmake); wna16_wgmma_built() says whether it is.
//
// Weights: its own code layout, repacked on the device from the fast layout (wna16_fast_layout.h) by
// launch_wna16_wgmma_repack: [n_blocks][k_tiles4 / 4][4 tiles j][32 lanes][4 k-tiles] u32, i.e. lane's
// 16 bytes hold tile j's code word of 4 consecutive k-tiles (k_tiles4 = k_tiles rounded up to 4,
// padding words zero), so warp j of a warpgroup loads its A fragments of 4 k-tiles with one 16-byte
// read. Scales and zeros are the fast layout's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/wna16_fast_kernels.h"

namespace qlm::cuda {

bool wna16_wgmma_built();

// Words of the repacked codes for w (4-bit): n_blocks * k_tiles4 * 128.
int64_t wna16_wgmma_code_words(const Wna16FastArgs& w);
// out (wna16_wgmma_code_words u32) = w.codes in the wgmma layout.
cudaError_t launch_wna16_wgmma_repack(const Wna16FastArgs& w, uint32_t* out, cudaStream_t stream);

// Token tile for M tokens (64 or 128).
inline int wna16_wgmma_tile_tokens(int64_t M) { return M <= 64 ? 64 : 128; }
// Whether this device can run the instantiation (sm_90, 4-bit, enough shared memory for 2 stages).
bool wna16_wgmma_usable(const Wna16FastArgs& w, int tile_tokens);
// k-stages of all (m-tile, column-tile) pairs: the work a persistent grid of at most that many blocks splits.
int64_t wna16_wgmma_stage_count(const Wna16FastArgs& w, int64_t M, int tile_tokens);
// Partial-sum slots per tile for a grid of `blocks` (ws: tiles * that * tile_tokens * 256 floats).
int64_t wna16_wgmma_max_segments(const Wna16FastArgs& w, int64_t M, int tile_tokens, int blocks);
// y[M, N] = x · W (+ bias): x [M, ldx] 16-bit, 16-byte aligned rows (ldx % 8 == 0), in packed-row order;
// codes_wg from launch_wna16_wgmma_repack; counters: one unsigned per tile, zero (left zero).
cudaError_t launch_wna16_wgmma_gemm(const Wna16FastArgs& w, const uint32_t* codes_wg, const void* x, int64_t ldx,
                                    int64_t M, int tile_tokens, int blocks, float* ws, unsigned* counters,
                                    const float* bias, void* y, cudaStream_t stream);

}  // namespace qlm::cuda
