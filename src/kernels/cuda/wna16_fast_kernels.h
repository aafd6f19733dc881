// Device kernels of `cuda_wna16_fast` (layout: wna16_fast_layout.h). Plain launchers; each enqueues
// on `stream` and returns the launch status.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

struct Wna16FastArgs {
  const void* codes = nullptr;   // uint4 [n_blocks][k_tiles][bits/4][32]
  const void* scales = nullptr;  // u16 [groups][n_blocks][8][8]
  const void* zeros = nullptr;   // same, or null: zero_const everywhere
  const int32_t* row_source = nullptr;
  uint32_t zero_const = 0;
  int bits = 4;
  bool bf16 = true;
  int64_t N = 0, N_pad = 0, n_blocks = 0, k_tiles = 0, tiles_per_group = 1, rows = 0;
};

constexpr int kWna16FastWarps = 4;

// Rows of one m-tile: 8 * mt, mt in {1, 2, 4}.
inline int wna16_fast_mt(int64_t M) { return M <= 8 ? 1 : M <= 16 ? 2 : 4; }
// Resident blocks per multiprocessor of the GEMM instantiation for (bits, bf16, mt, zp); 8-bit codes only (0 for 4).
int wna16_fast_occupancy(int bits, bool bf16, int mt, bool zp);

// xg[m, j] = x[m, row_source[j]] (0 for row_source -1); x [M, K], xg [M, rows], 16-bit elements.
cudaError_t launch_wna16_fast_gather(const void* x, int64_t M, int64_t K, const int32_t* row_source, int64_t rows,
                                     void* xg, cudaStream_t stream);
// y[M, N] = x · W (+ bias), 8-bit codes (4-bit: launch_wna16_gemv4). x: [M, ldx] 16-bit in packed-row order
// (ldx % 4 == 0). Grid:
// m-tiles x n_blocks x splits; splits > 1 needs ws (floats: splits * m_tiles * n_blocks * 512 * mt)
// and counters (n_blocks * m_tiles unsigned, zero; left zero).
cudaError_t launch_wna16_fast_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                                   unsigned* counters, const float* bias, void* y, cudaStream_t stream);
// GEMV-shaped kernel for 4-bit codes (wna16_gemv4_kernels.cu): warps stream their own k-tiles of one 64-column
// block into registers and scale late; grid m-tiles x n_blocks x splits like launch_wna16_fast_gemm (same ws and
// counters contract); launched for programmatic dependent launch where pdl_launches().
constexpr int kWna16Gemv4Warps = 8;
int wna16_gemv4_occupancy(bool bf16, int mt, bool zp);
cudaError_t launch_wna16_gemv4(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                               unsigned* counters, const float* bias, void* y, cudaStream_t stream);
// Tiled GEMM (wna16_tiled_kernels.cu): block tiles of 256 columns x 8 * mt tokens, mt in {1, 2, 4, 8},
// a cp.async shared-memory pipeline over stages of 8 k-tiles, split-K over blockIdx.z.
constexpr int kWna16TiledCols = 256;
inline int wna16_tiled_mt(int64_t M) { return M <= 8 ? 1 : M <= 16 ? 2 : M <= 32 ? 4 : 8; }
// Resident blocks per multiprocessor (0: the instantiation cannot be launched).
int wna16_tiled_occupancy(const Wna16FastArgs& w, int mt);
// y[M, N] = x · W (+ bias); x: [M, ldx] 16-bit in packed-row order, 16-byte aligned, ldx % 8 == 0.
// Grid: m-tiles x column tiles x splits; splits > 1 needs ws (floats: splits * m_tiles * n_tiles *
// 8 * mt * 256) and counters (m_tiles * n_tiles unsigned, zero; left zero).
cudaError_t launch_wna16_tiled_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int mt, int splits,
                                    float* ws, unsigned* counters, const float* bias, void* y, cudaStream_t stream);
// Stream GEMM (wna16_stream_kernels.cu, sm_90 only): a producer warp feeds 8 to 16 consumer warps through
// cp.async.bulk copies and mbarriers; tiles of 256 columns x 8 * mt tokens (mt in {1, 2, 4}, M <= 8 * mt),
// a persistent grid of `blocks` blocks splitting the k-stages of all tiles evenly (stream-K).
// Whether this device can run the instantiation for w and mt (shared memory for >= 2 stages).
bool wna16_stream_usable(const Wna16FastArgs& w, int mt);
// k-stages of all column tiles (the work the blocks split); a grid needs at most that many blocks.
int64_t wna16_stream_stage_count(const Wna16FastArgs& w);
// Partial-sum slots per column tile for a grid of `blocks` (ws holds n_tiles * that * 8 * mt * 256 floats).
int64_t wna16_stream_max_segments(const Wna16FastArgs& w, int64_t M, int blocks);
// y[M, N] = x · W (+ bias); x as for the tiled GEMM. ws and counters (n_tiles unsigned, zero; left zero)
// are needed unless blocks divides into whole tiles (always pass them). acq_rel_fixup: split tiles counted by one
// thread's acq_rel atomic instead of fences in every thread (bulk::arrive_tile_counter_acq_rel; wna16_fixup_mode).
// pdl: launched for programmatic dependent launch (the first ring's weights are requested before the
// previous kernel in the stream ends; x and every write after it). x_boxes: x through one 2-D bulk-tensor
// copy per stage where a tensor map of x can be made (x 16-byte aligned, ldx a multiple of 8), else (and
// with x_boxes false) one bulk copy per token row and stage.
cudaError_t launch_wna16_stream_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int mt, int blocks,
                                     float* ws, unsigned* counters, bool acq_rel_fixup, const float* bias, void* y,
                                     bool pdl, bool x_boxes, cudaStream_t stream);
// out[k, n] = W[k, n] (act dtype) for the K input rows and n < N_pad; out: [K, N_pad].
cudaError_t launch_wna16_fast_dequant(const Wna16FastArgs& w, void* out, cudaStream_t stream);

}  // namespace qlm::cuda
