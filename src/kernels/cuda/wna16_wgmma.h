// The wgmma GEMM of `cuda_wna16_fast` for 4-bit weights on sm_90a (src/kernels/cuda/sm90a/wna16_wgmma*):
// y^T = W^T x^T with `wgmma.mma_async` m64nNk16, the dequantized weights the register A operand (one
// 16-row slice per warp, the v1 conversion), the tokens the shared-memory B operand (128-byte swizzle),
// N = 16 to 256 tokens per tile (kWna16WgmmaTiles). Built with the other sm_90a kernels (when the CUTLASS
// headers are present, cmake/Cutlass.cmake); wna16_wgmma_built() says whether it is.
//
// Weights: the fast layout itself (wna16_fast_layout.h; no second copy): warp j of a warpgroup reads
// word j (16-column tile j) of each lane's 16 bytes per k-tile. Those words hold packed rows 4t..4t+3 of the
// k-tile (lane t = lane % 4: one LDS.64 per x fragment in the stream kernel), while the MMA's A fragment holds k
// slots 2t, 2t + 1, 2t + 8, 2t + 9. Two ways to meet (wna16_wgmma_natural_x picks per call):
//   - x permuted: launch_wna16_wgmma_permute_x first copies x into packed-row order with each 16-row k-tile permuted
//     the same way (slot 2t + e <- row 4t + e, slot 8 + 2t + e <- row 4t + 2 + e); the words are used as stored.
//   - x natural: the consumers exchange bytes of the words within each quad of lanes (natural_k_word in
//     sm90a/wna16_wgmma_kernel.cuh: two shuffles and a byte permutation per word), and x is the layer's input itself
//     (or its gathered copy in packed-row order under act-order or misalignment, launch_wna16_fast_gather). No
//     kernel before the GEMM, three instructions more per word in the consumer loop.
// Either way the kernel loads x with a tensor map (TMA, 128-byte swizzle) as the B operand.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/wna16_fast_kernels.h"
#include "kernels/cuda/wna16_fast_paths.h"  // kWna16WgmmaTiles

namespace qlm::cuda {

bool wna16_wgmma_built();

// xp [M, rows] = x [M, ldx] in packed-row order (row_source, -1: zero) and the MMA's k order. row_source
// null: identity rows, 16-byte aligned x with ldx % 8 == 0 (vector copies). pdl: launched for programmatic
// dependent launch (pdl.cuh; the kernel waits for the previous one first, then lets the GEMM launch).
cudaError_t launch_wna16_wgmma_permute_x(const void* x, int64_t M, int64_t ldx, const int32_t* row_source, int64_t rows,
                                         void* xp, bool pdl, cudaStream_t stream);

// The configuration (index into kWna16WgmmaTiles) for M tokens of a K x N layer on sm_count multiprocessors
// (wna16_wgmma_rule_tile); QLM_WGMMA_TILE=i forces one (tuning).
int wna16_wgmma_tile_for(int64_t M, int64_t K, int64_t N, int sm_count = 0);
// Whether a call with tiles of `tokens` tokens scales late (sm90a/wna16_wgmma_kernel.cuh: MMAs on raw codes, x sums,
// one scale group per stage): tiles of <= 32 tokens, groups of whole 8-k-tile stages (g128 and coarser),
// and QLM_WGMMA_LATE=1 (off by default: measured in session 18, correct and not faster).
// (wna16_fast_cuda.cc; set_wna16_wgmma_late in wna16_fast_paths.h overrides the environment.)
bool wna16_wgmma_late(const Wna16FastArgs& w, int tokens);
// Whether a call runs the one-group-per-stage consumer loop (OG in sm90a/wna16_wgmma_kernel.cuh: no group
// bookkeeping per k-tile): every stage inside one scale group (tiles_per_group a multiple of the stage's 8
// k-tiles, or one group over all of K) unless QLM_WGMMA_ONE_GROUP=0 (on by default since session 20's measurement;
// set_wna16_wgmma_one_group overrides the environment). Every tile has that kernel.
bool wna16_wgmma_one_group(const Wna16FastArgs& w);
// Whether this device can run the configuration (sm_90, 4-bit, a tensor-map encoder, 2 stages fit).
bool wna16_wgmma_usable(const Wna16FastArgs& w, int tile);
// Blocks per cluster (1 or 2): 2 runs the column tiles in pairs that share (multicast) each token tile
// (sm90a/wna16_wgmma_kernel.cuh; measured slower, docs/w4a16-kernel-notes.md v7i). QLM_WGMMA_PAIR=1|2 sets it
// (set_wna16_wgmma_pair in wna16_fast_paths.h overrides the environment); default 1.
int wna16_wgmma_pair();
// Producer warps that issue the ring's stages on the tiles with a producer warpgroup (producer_warps 4: the 128-token
// tiles and 64 x 384 / 64 x 512; the others have one): 1-4, each owning ring slots, at most one per slot
// (bulk::produce_stages, ring_schedule.h); default 4 (3 on the 128 x 256 tile's 3 slots): 7-15 % faster than one at
// 33-1024 tokens on the 70B layers (docs/w4a16-kernel-notes.md, v7l). QLM_WGMMA_PRODUCERS=n sets it
// (set_wna16_wgmma_producers in wna16_fast_paths.h overrides the environment); values above a tile's producer warps
// run that many.
int wna16_wgmma_producers();
// k-stages of all (m-tile, group of `pair` column tiles) units: the work a persistent grid of at most that many
// clusters splits.
int64_t wna16_wgmma_stage_count(const Wna16FastArgs& w, int64_t M, int tile, int pair = 1);
// Column tiles a call counts (its counters; ws: tiles * max_segments * tokens * columns floats): m-tiles x column
// tiles rounded up to whole pairs.
int64_t wna16_wgmma_tile_count(const Wna16FastArgs& w, int64_t M, int tile, int pair = 1);
// Partial-sum slots per tile for a grid of `blocks` (blocks / pair clusters).
int64_t wna16_wgmma_max_segments(const Wna16FastArgs& w, int64_t M, int tile, int blocks, int pair = 1);
// How many clusters of `pair` blocks of the configuration can be resident at once (0: unknown / cannot run).
int wna16_wgmma_max_clusters(const Wna16FastArgs& w, int tile, int pair);
// Whether y can take the staged epilogue: its 16-byte pieces of token rows need y 16-byte aligned and rows of a
// multiple of 8 elements.
inline bool wna16_wgmma_can_stage_y(const Wna16FastArgs& w, const void* y) {
  return reinterpret_cast<uintptr_t>(y) % 16 == 0 && w.N % 8 == 0;
}
// y[M, N] = x · W (+ bias): x [M, ldx] 16-bit (16-byte aligned rows, ldx % 8 == 0; columns past ldx read as zero),
// from launch_wna16_wgmma_permute_x, or in packed-row order and its own k order with natural_k; counters: one
// unsigned per tile, zero (left zero). pdl: launched for programmatic dependent launch; each block then requests its
// first ring of weights (which no kernel writes) before waiting for the previous kernel (which writes x), and x
// after.
// pair: blocks per cluster (blocks a multiple of it; wna16_wgmma_pair); producers: wna16_wgmma_producers;
// acq_rel_fixup: split tiles counted by one thread's acq_rel atomic instead of fences in every thread
// (wna16_fixup_mode). staged_y: each tile's y written through a ring slot in 16-byte pieces (wna16_wgmma_staged_y;
// only where wna16_wgmma_can_stage_y, else cudaErrorInvalidValue), else 2 bytes at a time from the accumulators.
// head_first: each block walks the segments of its split tiles before its whole tiles (stream_k_walk.h;
// wna16_wgmma_head_first); the same bits either way.
cudaError_t launch_wna16_wgmma_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int tile, int blocks,
                                    int pair, int producers, float* ws, unsigned* counters, bool acq_rel_fixup,
                                    bool natural_k, bool staged_y, bool head_first, const float* bias, void* y,
                                    bool pdl, cudaStream_t stream);
// The cap on the wgmma kernel's ring depth for a tile of `tokens` x `columns` (stages of 8 k-tiles; the kernel's own
// maximum is 8, fewer where shared memory holds fewer): QLM_WGMMA_MAX_STAGES=n (2-8, tuning) on every tile, else
// wna16_wgmma_default_stages(tokens, columns).
int wna16_wgmma_max_stages(int tokens, int columns);

}  // namespace qlm::cuda
