// The run-time rule of `cuda_wna16_fast`: which of its three paths runs a call with M tokens.
// Plain C++ (built without CUDA too, so tests and tools can name the paths everywhere).
//   gemv   — the split-K register-prefetch kernels, small M (4-bit: wna16_gemv4_kernels.cu, 8-bit:
//            wna16_fast_kernels.cu);
//   tiled  — the cp.async-pipelined tiled tensor-core GEMM (wna16_tiled_kernels.cu);
//   stream — the producer-warp, bulk-copy, stream-K GEMM for M <= 32 (wna16_stream_kernels.cu,
//            sm_90 only: elsewhere the kernel runs tiled instead);
//   wgmma  — the TMA + wgmma GEMM for 4-bit weights (sm90a/wna16_wgmma_kernel.cuh, sm_90 only), medium M;
//   cublas — weights dequantized into a scratch matrix, then cuBLAS (large M).
#pragma once

#include <cstdint>
#include <string>

namespace qlm {

namespace cuda {
// The wgmma path's tile configurations (sm90a/wna16_wgmma_kernel.cuh): tokens per tile (the wgmma's N), column
// blocks of 64 per consumer warpgroup, blocks per multiprocessor, producer warps (1; 2; or 4: a producer
// warpgroup giving its registers to the consumers, for 128 accumulators per thread), consumer warpgroups
// (a tile is 64 * blocks_per_wg * consumer_warpgroups columns). Entries 8 and 9 have three consumer
// warpgroups (512 threads). Entries 10 and 11 are entries 1 (64 x 128) and 4 (32 x 256) with two producer warps
// owning the ring's slots (the same registers and spills under ptxas; 2-10 % faster, v7m). The rule
// (wna16_wgmma_rule_tile) runs 8 (64 x 384) at 33-64 tokens on layers of >= 1e8 weights and 10 below; 11 at 17-32
// tokens on layers of >= 7.5e7 weights, 10 there on 70b.o-sized layers (N >= 8192) and under 3e7 weights on
// N <= 4096; 9 (128 x 192) above 64 tokens (6, 128 x 256, on the largest layers and where its tiles go whole; 12
// in its place on >= 2e8 weights where 256-token tiles pad no more);
// 3 and 5 where the stream kernel is turned off (9-16 tokens); 0, 1, 2, 4 and 7 only when forced (QLM_WGMMA_TILE=i).
// Entry 12 (256 x 128: each consumer warpgroup one m64n256k16 per k-tile, half the dequantization per MMA of the
// 128 x 256 tile, twice its x per weight; 3 stages of 73-76 KB) replaces 6 on layers of >= 2e8 weights where 256-token
// tiles pad no more than 128-token ones (3-4 % ahead there, notes v7r).
struct Wna16WgmmaTile {
  int tokens, blocks_per_wg, per_sm, producer_warps, consumer_warpgroups;
  constexpr int columns() const { return 64 * blocks_per_wg * consumer_warpgroups; }
};
// k-tiles (of 16 rows) per stage of the wgmma kernel; late scaling needs scale groups of whole stages.
inline constexpr int kWna16WgmmaStageTiles = 8;
// Whether every stage of the wgmma kernel (8 k-tiles from a multiple of 8) lies inside one scale group of
// tiles_per_group k-tiles: groups of whole stages (g128 and coarser) or one group over all k_tiles.
constexpr bool wna16_wgmma_stages_in_one_group(int64_t tiles_per_group, int64_t k_tiles) {
  return tiles_per_group % kWna16WgmmaStageTiles == 0 || tiles_per_group >= k_tiles;
}
inline constexpr Wna16WgmmaTile kWna16WgmmaTiles[] = {
    {64, 2, 1, 1, 2}, {64, 1, 2, 1, 2},  {128, 1, 1, 1, 2}, {16, 2, 2, 1, 2}, {32, 2, 2, 1, 2},
    {16, 1, 3, 1, 2}, {128, 2, 1, 4, 2}, {64, 4, 1, 4, 2},  {64, 2, 1, 4, 3}, {128, 1, 1, 4, 3},
    {64, 1, 2, 2, 2}, {32, 2, 2, 2, 2},  {256, 1, 1, 4, 2}};
}  // namespace cuda

enum class Wna16FastPath { Auto = 0, Gemv = 1, Tiled = 2, Cublas = 3, Stream = 4, Wgmma = 5 };

// The path the rule picks for M tokens of a K x N layer (never Auto): stream for 4-bit weights at M <= 16 (sm_90);
// where it cannot run, gemv for 4-bit weights at M <= 8 where its split-K plan fills one full wave of the GPU's
// sm_count multiprocessors (wna16_gemv4_full_wave; sm_count 0: unknown, never), and at M = 1 where it fills
// kWna16Gemv4OneTokenWavePercent (70 %) of it; wgmma for 4-bit weights
// where wna16_wgmma_rule_tile gives a tile and it can run (wgmma_ok: sm_90 with the sm_90a kernels); tiled otherwise,
// below the cuBLAS bound; dequantize + cuBLAS at and above it. The bound grows with the layer (measured on the H200, v3
// and v6 in docs/w4a16-kernel-notes.md: dequantizing costs a pass over K x N, the tiled GEMM fills the GPU only with
// enough column tiles): M >= 256 for K*N >= 2e8, >= 128 for K*N >= 4e7, else >= 48; where wgmma runs, M >= 2560 for K*N
// >= 2e8, 1536 for >= 2e7, else 65 (v6g, v7l, v7o, v7x). 8-bit weights take the GEMV kernel
// for M <= 8 (int8 70b.gate_up M=1: 170 us vs 233 tiled). Environment overrides: QLM_W4FAST_CUBLAS_MIN_M (one bound for
// every layer), QLM_W4FAST_GEMV_MAX_M (GEMV kernel up to that M for every width), QLM_W4FAST_PATH (gemv / tiled /
// stream / wgmma / cublas: always that path), QLM_W4FAST_STREAM_MAX_M (stream up to that M, at most 32, on every layer
// and width; 0: never), QLM_W4FAST_STREAM_MIN_KN (stream at any M only on layers of at least that many weights K * N;
// 75000000: the rule before session 27), QLM_W4FAST_WGMMA_MIN_M (wgmma from that M on every layer, instead of the
// tiles' rule), QLM_W4FAST_GEMV_ONE_TOKEN_WAVE (the share of a wave, in percent, that lets the GEMV kernel take M = 1;
// default 70, 90: as at M = 2-8), QLM_W4FAST_GEMV_FIRST=1 (the GEMV kernel's choice above ahead of the stream kernel,
// as before session 32). stream_ok: whether the stream kernel can run here (sm_90, shared memory); if not, the
// rule goes on as if its bound were 0.
Wna16FastPath wna16_fast_path_for(int64_t M, int64_t K, int64_t N, int bits, bool stream_ok = true,
                                  bool wgmma_ok = false, int sm_count = 0);
// Blocks of the 4-bit GEMV kernel resident per multiprocessor at M <= 8 (its launch bounds guarantee it).
inline constexpr int kWna16Gemv4BlocksPerSm = 2;
// Whether the 4-bit GEMV kernel's plan for a K x N layer at M <= 8 is one full wave: with n_blocks = N / 64 column
// blocks and slots = kWna16Gemv4BlocksPerSm * sm_count, splits = slots / n_blocks >= 1 give at least 90 % of the
// slots, and every warp (8 per block) keeps >= 8 k-tiles of 16 rows. Measured on the H200 (v7 in
// docs/w4a16-kernel-notes.md): such plans (Llama-3 o and down layers) beat the stream and tiled kernels; plans of
// several waves or short runs (qkv, gate_up) lose to them.
bool wna16_gemv4_full_wave(int64_t K, int64_t N, int sm_count);
// The same test with the share of the wave's slots as a parameter (full wave: kWna16Gemv4FullWavePercent).
bool wna16_gemv4_one_wave(int64_t K, int64_t N, int sm_count, int64_t percent);
inline constexpr int64_t kWna16Gemv4FullWavePercent = 90;
// At M = 1 the GEMV kernel also takes plans that fill this share of the wave (QLM_W4FAST_GEMV_ONE_TOKEN_WAVE=p sets
// it; 90: one token like 2-8). Measured on the H200 (docs/w4a16-kernel-notes.md, v7f-v7g): 70 gives 8b.qkv (96 column
// blocks x 2 splits = 192 of 264 slots) the GEMV kernel at 9.9 us against 10.8 tiled alone (three runs), and 8B
// decode 373.8 / 377.8 / 376.2 tokens/s against 374.2 / 374.3 / 374.7 at a 16-token prompt, 343.2 against 335.8 at
// 4000 (alternating runs); at M = 2-8 the stream kernel stays ahead there (10.2-11.6 vs 10.5-13.2).
inline constexpr int64_t kWna16Gemv4OneTokenWavePercent = 70;
// The stream kernel's ring (wna16_stream_kernels.cu): at most kWna16StreamMaxStages stages of 16 KB of codes.
inline constexpr int kWna16StreamMaxStages = 12;
// Its default depth by m-tiles: 6 at one (M <= 8), 4 at two (M = 9-16), the deepest that fits at more. Measured on
// the H200 (docs/w4a16-kernel-notes.md, v7g-v7h): with 6 stages at one m-tile (~110 KB of shared memory instead of
// ~210, so the neighbouring kernels' blocks fit beside it) 8B decode ran 379.7 / 380.2 tokens/s against 374.2 /
// 374.7 with 12 at a 16-token prompt, 346.2 against 340.6 / 341.3 at 4000, the 8-layer 70B 583.1 / 583.3 against
// 576.8 / 565.5 (3 stages: within 0.5 %). At two m-tiles, layers alone at M = 9 / 12 / 16: 4 stages against 12
// 8b.gate_up 28.6 / 28.8 / 29.1 vs 30.3 / 30.4 / 29.9 us, 70b.qkv 23.2 / 23.5 / 23.8 vs 24.8 / 25.2 / 24.8,
// 70b.down 49.9 / 50.3 / 50.6 vs 50.6 / 50.9 / 51.0, 70b.gate_up 89.6 / 90.0 / 90.7 vs 89.2 / 89.4 / 90.0.
// QLM_W4FAST_STREAM_MAX_STAGES=n (2-12) sets the cap for every m-tile count.
constexpr int wna16_stream_default_stages(int m_tiles) {
  return m_tiles == 1 ? 6 : m_tiles == 2 ? 4 : kWna16StreamMaxStages;
}
// The ring depth for `fit` stages in shared memory, at most `cap`, rounded down to a multiple of `warp_phases`:
// the consumer warp groups that take the stages in turn (3 at one m-tile, 2 at two; 1 where every warp reads every
// stage); 0 where fewer than max(2, warp_phases) remain (the kernel cannot run). Invariant: a consumer warp's
// previous use of its next ring slot is then that slot's previous stage, which it waited for itself, so the parity
// of its mbarrier wait cannot be met by a phase two behind. (With 4 slots and 3 groups a warp could pass the wait
// for stage i while stage i - 4 was still landing and read it; 8B decode with 4 stages failed with a launch error.)
constexpr int wna16_stream_ring_stages(int fit, int cap, int warp_phases) {
  const int phases = warp_phases < 1 ? 1 : warp_phases;
  int stages = fit < cap ? fit : cap;
  stages -= stages > 0 ? stages % phases : 0;
  return stages >= 2 && stages >= phases ? stages : 0;
}
// Whether the wgmma GEMM's grid of `blocks` blocks (at most per_sm per multiprocessor) is launched for programmatic
// dependent launch: only where every placement of the blocks puts as many on the busiest multiprocessor as the
// even one does, i.e. blocks > (per_sm - 1) * sm_count. Launched early, while the kernel before still holds
// resources, the blocks are packed onto the multiprocessors that have room, up to per_sm each, instead of spread
// one per multiprocessor: H200, 8b.o (128 blocks of 2 per SM at M = 64, 256 of 3 at 17 / 32) 24.2 / 19.9 / 20.1
// us with it against 19.1 / 17.0 / 17.2 without; on full grids it gains 1-3 us (70b.qkv M = 64 42.9 vs 46.0,
// docs/w4a16-kernel-notes.md, v7h). sm_count <= 0 (unknown): never.
constexpr bool wna16_wgmma_pdl_grid(int64_t blocks, int per_sm, int sm_count) {
  return sm_count > 0 && blocks > static_cast<int64_t>(per_sm - 1) * sm_count;
}
// A tuning setting of the W4A16 kernels: the tests' override where set (> 0), else the environment's value where set
// (> 0), else the default (QLM_WGMMA_PAIR, QLM_WGMMA_PRODUCERS, QLM_W4FAST_STREAM_MAX_STAGES, ..._PRODUCERS).
constexpr int64_t wna16_setting(int64_t override_value, int64_t env_value, int64_t fallback) {
  return override_value > 0 ? override_value : env_value > 0 ? env_value : fallback;
}
// An on / off switch of the W4A16 kernels: the tests' override where set (0 off, 1 on; -1 unset), else the
// environment's (QLM_WGMMA_STAGED_Y, QLM_WGMMA_HEAD_FIRST, QLM_WGMMA_LATE, QLM_WGMMA_ONE_GROUP).
constexpr bool wna16_switch(int override_mode, bool env_on) { return override_mode < 0 ? env_on : override_mode != 0; }
// The default cap on the wgmma kernel's ring (stages of 8 k-tiles) for a tile of `tokens` x `columns`: on the
// 128-token tiles 3 at 256 columns (where 4 fit) and 4 at fewer (5 fit at 128 x 192), else 8 (the kernel's
// maximum). H200, same binary (docs/w4a16-kernel-notes.md, v7i): at 4 the 128 x 192 tile is 1-2 us ahead at
// M = 256 on 70b.o 72.5 vs 74.2, 70b.qkv 86.7 vs 87.5, 8b.down 64.8 vs 66.9, 8b.gate_up 121.4 vs 122.3 (the same in
// session 30); at 3 the 128 x 256 tile is 1-2 % ahead at M = 512-1024 on 11 of 12 points (70b.gate_up 1024: 1372
// vs 1399). The tiles of fewer tokens are within noise either way, so they keep 8.
constexpr int wna16_wgmma_default_stages(int tokens, int columns) {
  return tokens >= 128 ? (columns >= 256 ? 3 : 4) : 8;
}
// The persistent stream-K grid over `tiles` tiles of equal k-stage counts, at most `cap` blocks (clusters): the most
// blocks G with keep_permille / 1000 x cap <= G <= cap that line up with the tiles — G a multiple of the tile count
// (each tile split into G / tiles segments) or a divisor of it (whole tiles per block) — else cap. Block b's share
// [b T / G, (b + 1) T / G) of the T = tiles x P stages then starts and ends on tile boundaries or at i P / s inside
// one (segments differ by one stage at most): no block writes partial sums of a tile it did not start, and a split
// tile has one segment fewer than a misaligned split gives it. H200 (docs/w4a16-kernel-notes.md, v7i), same binary,
// aligned vs the largest grid: stream kernel at M = 16 8b.o 11.8 vs 13.7 us, 8b.down 18.9 vs 21.9, 70b.o 18.7 vs
// 21.5, 70b.down 48.3 vs 50.2; wgmma 64 x 128 tile at M = 33 / 64 70b.o 34.9 / 36.6 vs 37.3 / 38.6. cap <= 0: 1.
// For the stream kernel keep_permille is wna16_stream_aligned_keep.
constexpr int64_t wna16_aligned_grid(int64_t tiles, int64_t cap, int64_t keep_permille = 875) {
  if (cap <= 1 || tiles <= 0) return cap < 1 ? 1 : cap;
  for (int64_t g = cap; 1000 * g >= keep_permille * cap && g >= 1; --g)
    if (g % tiles == 0 || tiles % g == 0) return g;
  return cap;
}
// The wgmma grid: the aligned grid where one keeps the share (whole tiles, or tiles split into equal segments); else,
// within the same share, the most blocks G that each cover an odd number of half tiles ((2 x tiles) % G == 0) while
// adding at most 1/8 of a tile to each block's work (tiles / G - tiles / cap <= 1/8), else cap. On a half-tile grid
// every split tile is split once, in halves, and blocks alternate whole tiles + a head and a tail + whole tiles: one
// partial each instead of a head and a tail. Measured once (docs/w4a16-kernel-notes.md, v8a; H100): 70b.qkv at 1024
// tokens, 320 tiles of 256 x 128, 128 blocks of 2.5 tiles 247.5 µs against 260.7 / 260.8 on 132 blocks of 2.42, which
// puts a block's second partial at about a quarter of a tile's time; the 1/8 keeps the extra work well under that.
constexpr int64_t wna16_wgmma_grid(int64_t tiles, int64_t cap, int64_t keep_permille = 875, bool half_tiles = true) {
  const int64_t aligned = wna16_aligned_grid(tiles, cap, keep_permille);
  if (!half_tiles || cap <= 1 || tiles <= 0 || tiles % aligned == 0 || aligned % tiles == 0) return aligned;
  for (int64_t g = cap; 1000 * g >= keep_permille * cap && 8 * tiles * (cap - g) <= g * cap && g >= 1; --g)
    if ((2 * tiles) % g == 0) return g;
  return cap;
}
// Whether `tiles` equal tiles go whole to the blocks of the aligned grid (wna16_aligned_grid): its G divides the tile
// count, so no block writes partial sums (G a multiple instead splits every tile into segments).
constexpr bool wna16_whole_tiles(int64_t tiles, int64_t cap, int64_t keep_permille = 875) {
  return tiles > 0 && cap > 0 && tiles % wna16_aligned_grid(tiles, cap, keep_permille) == 0;
}
// The share of the stream kernel's largest grid (one block per SM) an aligned grid must keep, per mille: 800 on
// layers of < 2e8 weights, 875 above. H200, same binary: 8b.gate_up (112 tiles) on 112 blocks,
// a tile each, M = 1 / 16 23.9 / 27.1 us vs 24.9 / 29.1 on 132; 70b.gate_up (224 tiles) on 112 blocks of two tiles
// 86.7 / 99.0 vs 78.5 / 90.6 — the longest layers need every SM's ring of copies in flight (notes v7i).
constexpr int64_t wna16_stream_aligned_keep(int64_t K, int64_t N) {
  return static_cast<double>(K) * static_cast<double>(N) < 2e8 ? 800 : 875;
}
// The stream-K grid for 2-16 tokens on layers of < 6e7 weights (wna16_stream_small_grid_layer): the most blocks G <=
// permille / 1000 x cap that split every one of the `tiles` tiles into the same number of segments, at least two (G a
// multiple of the tile count, >= 2 x tiles), or 0 where there is none (the aligned grid then stays). With more tokens
// the partial sums that a split tile's last block adds up grow (16 rows x 256 columns x 4 bytes a segment at 16
// tokens), and on small layers fewer segments pay for fewer SMs. H100, session 55, same binary
// (docs/w4a16-kernel-notes.md, v7w; docs/perf-data/w4a16_small_grid_h100_s55.jsonl), µs at 2 / 8 / 16 tokens, aligned
// grid vs 750 per mille: 8b.o 4096 x 4096 (128 -> 96 blocks) 7.61 / 8.53 / 11.96 vs 7.12 / 7.61 / 10.53; 8b.qkv 4096 x
// 6144 (120 -> 96) 8.75 / 9.27 / 13.01 vs 8.42 / 8.99 / 11.02; 8b.down 14336 x 4096 15.04 / 16.68 / 19.22 vs 14.38 /
// 15.09 / 19.37; 3072 x 3072 (132 -> 96) 7.75 / 8.43 / 12.55 vs 5.76 / 6.42 / 9.68; 8192 x 3072 11.47 / 12.06 / 15.88
// vs 8.83 / 9.62 / 12.91; 3584 x 4608, 3584 x 3584, 3072 x 5120 4-13 % ahead at 12-16 tokens, 0-7 % at 2-8 (3072 x 5120
// at 2 tokens 1.9 % behind). One block per tile (3072 x 16384: 64 blocks instead of 128) lost 12-25 %, hence two
// segments at least; on 70b.o (6.7e7 weights) 96 blocks cost 8-10 %, hence the layer bound. Measured on the H100 only.
constexpr int64_t kWna16StreamSmallGridPermille = 750;
constexpr int64_t wna16_stream_small_grid(int64_t tiles, int64_t cap,
                                          int64_t permille = kWna16StreamSmallGridPermille) {
  if (tiles <= 0 || cap <= 0 || permille <= 0) return 0;
  const int64_t per_tile = cap * permille / 1000 / tiles;
  return per_tile >= 2 ? per_tile * tiles : 0;
}
// Whether M tokens of a K x N layer take wna16_stream_small_grid's grid: 2 <= M (one token keeps the aligned grid: no
// gain measured there) on layers of < 6e7 weights.
constexpr bool wna16_stream_small_grid_layer(int64_t M, int64_t K, int64_t N) {
  return M >= 2 && static_cast<double>(K) * static_cast<double>(N) < 6e7;
}
// The wgmma tile configuration (index into kWna16WgmmaTiles, wna16_wgmma.h) the rule gives M tokens of a
// K x N layer of 4-bit weights, or -1 where the rule leaves M to the other paths: M >= 33 everywhere;
// below, M >= 16 on layers of < 3e7 weights with N <= 4096, M >= 17 on >= 7.5e7 and on [6e7, 7.5e7) with
// N >= 8192, M >= 9 on >= 4e8 (the tile by M and size, v6g: 33-64 tokens 64 x 384 on layers of >= 1e8 weights,
// 64 x 128 below; above 64 tokens 128 x 192, and 128 x 256 on >= 4e8 and from M = 192 on >= 2e8; v7d for the
// bounds below 33 tokens; v7l: on [4e7, 2e8) also 128 x 256 where its tiles go whole to the blocks of an aligned
// grid of sm_count, wna16_whole_tiles, and 128 x 192's do not; sm_count <= 0, unknown: never). Where the stream
// kernel runs (M <= 16 by default) the tiles below 17 tokens are unused.
int wna16_wgmma_rule_tile(int64_t M, int64_t K, int64_t N, int sm_count = 0);
// The rule's paths over the token count for a K x N layer, as consecutive ranges:
// "M 1-16 stream · 17-32 wgmma 32x256 · ... · >= 2560 dequant+cuBLAS" (environment overrides
// and test overrides not applied; stream_ok / wgmma_ok as for wna16_fast_path_for). For `qlm inspect --plan`.
std::string wna16_fast_path_summary(int64_t K, int64_t N, int bits, bool stream_ok, bool wgmma_ok, int sm_count = 0);
// Process-wide override for tests (Auto: back to the rule).
void set_wna16_fast_path(Wna16FastPath path);
// Process-wide overrides of the wgmma path for tests: the tile configuration (index into kWna16WgmmaTiles;
// -1: QLM_WGMMA_TILE or the rule) and late scaling in the tiles of <= 32 tokens (1 on, 0 off, -1:
// QLM_WGMMA_LATE, off by default).
void set_wna16_wgmma_tile(int tile);
void set_wna16_wgmma_late(int mode);
// The same for the one-group-per-stage consumer loop of the wgmma kernel (1 on, 0 off, -1: QLM_WGMMA_ONE_GROUP,
// on by default).
void set_wna16_wgmma_one_group(int mode);
// The same for the wgmma kernel's blocks per cluster (1 or 2: column tiles in pairs sharing the token tile; 0:
// QLM_WGMMA_PAIR or the default, 1).
void set_wna16_wgmma_pair(int pair);
// The same for the wgmma kernel's producer warps (1-4; 0: QLM_WGMMA_PRODUCERS or the default, 4).
void set_wna16_wgmma_producers(int producers);
// Process-wide override of the stream kernel's ring cap for tests (2-12; 0: QLM_W4FAST_STREAM_MAX_STAGES or
// wna16_stream_default_stages), read by each launch; and its current value.
void set_wna16_stream_max_stages(int stages);
int wna16_stream_max_stages_override();
// The same for the stream kernel's producer warps (1-3; 0: QLM_W4FAST_STREAM_PRODUCERS or the default, 3).
void set_wna16_stream_producers(int producers);
int wna16_stream_producers_override();
// How the stream and wgmma kernels count a split tile's segments (their stream-K fix-up): 1, a __threadfence() in
// every thread around one thread's atomicAdd; 2, one thread's acq_rel atomic between two barriers
// (bulk::arrive_tile_counter_acq_rel; default since session 34: 1-3 % faster at M = 1-256, docs/w4a16-kernel-notes.md
// v7m). QLM_W4FAST_FIXUP=1|2 sets it; set_wna16_fixup_mode overrides the environment
// for tests (0: back to it).
void set_wna16_fixup_mode(int mode);
// Whether the wgmma path takes x in its own k order (the consumers exchange the code words' bytes within each quad
// of lanes) rather than permuted into the words' order by a kernel before the GEMM (wna16_wgmma.h; the one-group
// loop only: other calls permute x regardless). QLM_WGMMA_NATURAL_X: 0 never, 1 always, 2 (the default) from 33 up
// to 128 tokens on layers of < 2e8 weights and up to 256 on those of < 1e8 with N <= 4096, where the permutation
// kernel's fixed cost outweighs the consumers' three more instructions per code word (v7n, v7o), and from 1024 tokens
// where the call runs `tile` 12 (256 x 128) on a layer of [4e7, 2e8) weights (v8a).
// set_wna16_wgmma_natural_x (0-2) overrides the environment for tests (-1: back to it).
bool wna16_wgmma_natural_x(int64_t M, int64_t K, int64_t N, int tile = -1);
void set_wna16_wgmma_natural_x(int mode);
// Whether the wgmma kernel writes each tile's y through a ring slot it keeps for the epilogue, in whole 16-byte
// pieces of token rows (where y is 16-byte aligned and N % 8 == 0), instead of 2 bytes at a time
// from the accumulators, whose column order gives a warp's store 4 tokens x 4-8 partly written sectors. The same bits
// either way. QLM_WGMMA_STAGED_Y=0 turns it off; set_wna16_wgmma_staged_y (0 / 1) overrides the environment for tests
// (-1: back to it).
bool wna16_wgmma_staged_y();
void set_wna16_wgmma_staged_y(int mode);
// Whether each block of the wgmma kernel's stream-K grid walks the segments of its split tiles before its whole tiles
// (kernels/cuda/stream_k_walk.h): their fix-ups then read partial sums written moments before, and the blocks end on
// whole tiles instead of all summing partials at the end. The same bits either way. QLM_WGMMA_HEAD_FIRST=1 turns it on
// (off by default: within 1.2 % of the walk in order where measured, v8a); set_wna16_wgmma_head_first (0 / 1)
// overrides the environment for tests (-1: back to it).
bool wna16_wgmma_head_first();
void set_wna16_wgmma_head_first(int mode);
// A cap on the wgmma kernel's grid, in clusters (tuning: QLM_WGMMA_BLOCKS=n, used as given, no aligned grid), to
// measure what the stream-K split of the tiles over the grid costs (e.g. 320 tiles on 132, 128 or 110 blocks) and for
// tests that need blocks covering several tiles on small layers; 0: none. set_wna16_wgmma_blocks overrides the
// environment for tests (0: back to it).
int64_t wna16_wgmma_max_blocks();
void set_wna16_wgmma_blocks(int blocks);
// Whether the wgmma grid may split tiles in halves (wna16_wgmma_grid): QLM_WGMMA_HALF_TILES=0 turns it off (tuning).
bool wna16_wgmma_half_tiles();
namespace cuda {
int wna16_fixup_mode();
}  // namespace cuda
// Whether this build has the wgmma kernel (CUDA with the sm_90a kernels, i.e. CUTLASS headers found).
bool wna16_wgmma_compiled();
// How many clusters of `pair` blocks (1 or 2) of wgmma tile configuration `tile` the current CUDA device can hold at
// once for 4-bit weights of k_tiles x n_blocks (groups of tiles_per_group k-tiles); 0 without the kernel or a
// device. For tests and notes: the grid the pairs get.
int wna16_wgmma_resident_clusters(int64_t k_tiles, int64_t n_blocks, int64_t tiles_per_group, bool bf16, int tile,
                                  int pair);

}  // namespace qlm
