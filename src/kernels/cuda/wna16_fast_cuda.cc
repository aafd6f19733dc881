// `cuda_wna16_fast`: tensor-core W4A16 / W8A16 linear layers (F16 / BF16 activations, sm_80+).
// Paths by M (wna16_fast_paths.h): a split-K GEMV-style kernel and the bulk-copy stream kernel for the
// smallest M, a tiled cp.async-pipelined GEMM and (sm_90, 4-bit) the TMA + wgmma GEMM for medium M, and
// dequantize + cuBLAS for large M; the kernels need an activation gather when rows move (act-order,
// groups padded to 16 rows, misaligned x; the wgmma path always copies x into its k order). See
// docs/w4a16-kernel-notes.md.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "kernels/cuda/wna16_fast_paths.h"

namespace qlm {
namespace {

// Measured on the H200 (docs/w4a16-kernel-notes.md, v3 runs): for 4-bit weights the GEMV kernel wins only
// on some layers at M <= 16 and by <= 15 % (70b.qkv M=1: 25.0 vs 27.4 us), the tiled GEMM elsewhere; for
// 8-bit weights the GEMV kernel wins clearly at M = 1 (70b.gate_up 170 vs 233 us) and loses at M = 16.
constexpr int64_t kWna16FastGemvMaxM8 = 8;
// The stream kernel runs 4-bit weights at M = 1-16 on every layer where it can run (sm_90). History
// (docs/w4a16-kernel-notes.md): v5 to v5j put it on layers of >= 7.5e7 weights only (M = 1: 18-36 % ahead of the
// tiled kernel on 70b.qkv, 8b.gate_up, 70b.down, 70b.gate_up; behind on the 8B qkv, o and down layers); session 27
// (v7d) took it to M = 2-16 on every layer; M = 1 below 7.5e7 weights and M <= 8 on the full-wave layers (o, down)
// stayed with the GEMV kernel, because the stream kernel lost in the model there (8B decode with a 4000-token prompt
// 322.5-325.0 tokens/s against 337.0-339.3). Session 32 (v7k): with two producer warps it leads everywhere at
// M = 1-8 (M = 1, us: 70b.down 33.5 vs 39.8 GEMV, 70b.o 13.2 vs 15.5, 8b.down 12.3 vs 14.2, 8b.qkv 8.4 vs 9.9, 8b.o
// 6.9 vs 7.6) and in the model (8B decode 427.7 / 423.1 vs 413.7 / 412.2 tokens/s at a 16-token prompt, 389.9 vs
// 376.3 at 4000), so the GEMV kernel keeps 4-bit layers only where the stream kernel cannot run.
// QLM_W4FAST_STREAM_MIN_KN=N puts a size bound on every M (75000000: the rule before session 27, for A/B runs);
// QLM_W4FAST_GEMV_FIRST=1 gives the full-wave layers back to the GEMV kernel at M <= 8 (the rule before session 32).
int64_t default_stream_max_m(int64_t K, int64_t N, int bits, int64_t min_kn) {
  const double kn = static_cast<double>(K) * static_cast<double>(N);
  return bits == 4 && kn >= static_cast<double>(min_kn) ? 16 : 0;
}
// 7.5e7 weights: a size bound of the wgmma tile rule (v7d).
constexpr double kWna16FastLargeLayerKN = 7.5e7;

// M at and above which dequantize + cuBLAS beats the tiled GEMM (v3 runs), by layer size K * N.
int64_t default_cublas_min_m(int64_t K, int64_t N) {
  const double kn = static_cast<double>(K) * static_cast<double>(N);
  return kn >= 2e8 ? 256 : kn >= 4e7 ? 128 : 48;
}
// The cuBLAS bound where the wgmma kernel (sm_90a, 4-bit) runs, by layer size: measured on the H200 after the
// split-K sums were batched (docs/w4a16-kernel-notes.md, v6g, session 21: the best wgmma tile against dequantize +
// cuBLAS, us): 70b.gate_up (4.7e8) 1536 2227 vs 2236 (ahead up to 2048 in session 20), so cuBLAS only beyond
// what was measured; 70b.down (2.3e8) 768 544 vs 626, 1024 743-785 (three runs) vs 753; 8b.gate_up (1.2e8) 768
// 312 vs 332, 1024 406 vs 387; 70b.qkv (8.4e7) 768 221 vs 227, 1024 288 vs 275; 70b.o (6.7e7) 512 131 vs 134, 768
// 182 vs 179; 8b.down (5.9e7) 768 152 vs 157, 1024 211 vs 189; 8b.qkv (2.5e7) 128 32 vs 36, 192 41 vs 39; 8b.o
// (1.7e7) 64 19 vs 21, 96 25 (64-token tiles) / 28 (128-token) vs 26. Session 33, after the 128-token tiles got four
// producer warps (v7l): 70b.down 1024 663 vs 763, 1536 1009 vs 1062, 2048 1434 vs 1444; 70b.o 768 164 vs 179, 1024
// 225 vs 219; 8b.down 768 143 vs 156, 1024 203 vs 187; 70b.qkv 1024 280 vs 274; 8b.gate_up 1024 430 vs 389.
// Session 35, with x in its own k order (wgmma_cublas_bound_s35.jsonl, M = 192 / 256 / 320): 8b.qkv 36.5 / 37.7 /
// 49.1 vs 38.8 / 40.1 / 47.7, 4096 x 8192 45.9 / 47.4 / 46.2 vs 50.5 / 51.2 / 54.6, 6144 x 4096 35.1 / 35.9 / 44.4 vs
// 45.2 / 41.0 / 42.2, 5120 x 5120 41.9 / 43.3 / 50.9 vs 40.5 / 43.7 / 49.2: [2e7, 4e7) keeps wgmma through 256 tokens
// (two 128-token m-tiles; the third costs more than the dequantization).
// Session 58, after the wgmma kernel's y went through a ring slot (v7x; H100, wgmma forced vs dequantize + cuBLAS
// forced, docs/perf-data/w4a16_bounds_h100_s58.jsonl, us): 70b.down (2.3e8) 1536 959 vs 1087, 2048 1272 vs 1383 ->
// 2560 (as >= 4e8); 70b.qkv (8.4e7) 1024 259 vs 294, 1536 394 vs 405, 2048 479 vs 501; 70b.o 1024 195 vs 231, 1536 310
// vs 311; 8b.gate_up (1.2e8) 1024 359 vs 417, 1536 542 vs 582, 2048 803 vs 713; 8b.down 1024 178 vs 198, 1536 287 vs
// 279 -> 1536 on [4e7, 2e8) (was 1024, and 1536 only where the 128 x 256 tiles went whole); 8b.qkv (2.5e7) 512 43 vs
// 57, 768 74 vs 73, 1024 82 vs 89, 1536 121 vs 123, 2048 171 vs 153 -> 1536 on [2e7, 4e7) (was 257); 8b.o (1.7e7)
// 512 41 vs 38, 768 44 vs 48, 1024 69 vs 58: unchanged.
int64_t wgmma_cublas_min_m(int64_t K, int64_t N) {
  const double kn = static_cast<double>(K) * static_cast<double>(N);
  return kn >= 2e8 ? 2560 : kn >= 2e7 ? 1536 : 65;
}

// Whether tile t's tiles of M tokens go whole to the blocks of the aligned grid on sm_count SMs (<= 0, unknown: no).
bool whole_tiles(const cuda::Wna16WgmmaTile& t, int64_t M, int64_t N, int sm_count) {
  if (sm_count <= 0) return false;
  const int64_t tiles = (M + t.tokens - 1) / t.tokens * ((N + t.columns() - 1) / t.columns());
  return wna16_whole_tiles(tiles, int64_t{sm_count} * t.per_sm);
}
// Whether the wgmma kernel's 128 x 256 tiles (kWna16WgmmaTiles[6], per_sm blocks per SM) for M tokens of N columns go
// whole to the blocks of the aligned grid on sm_count multiprocessors, and the 128 x 192 tiles' (9) do not: then no
// block of the 128 x 256 grid writes partial sums while the 128 x 192 grid splits tiles. H200, session 33 (notes v7l,
// same binary, us, 128 x 256 vs 128 x 192): 70b.o M = 512 (128 tiles vs 172) 103.6 vs 125.1, M = 1024 (256 vs 344)
// 202.4 vs 225.0 and dequantize + cuBLAS 215.8; 8b.down M = 1024 (128 vs 176) 178.7 vs 206.0, cuBLAS 187.4; 70b.qkv
// M = 384 (120 vs 162) 105.7 vs 121.9, M = 768 (240 vs 324) 204.1 vs 212.4; where neither or both go whole the
// 128 x 192 tile was ahead or even (70b.qkv M = 512 149.3 vs 158.6; 8b.down M = 512, 64 tiles split in two, 109.5
// vs 112.5; 8b.gate_up M = 1024 even, 388.1 vs 428.8 but cuBLAS 388.3).
bool whole_128x256_tiles(int64_t M, int64_t N, int sm_count) {
  return whole_tiles(cuda::kWna16WgmmaTiles[6], M, N, sm_count) &&
         !whole_tiles(cuda::kWna16WgmmaTiles[9], M, N, sm_count);
}

std::atomic<int> g_forced_path{0};
std::atomic<int> g_wgmma_tile{-1};        // set_wna16_wgmma_tile
std::atomic<int> g_wgmma_late{-1};        // set_wna16_wgmma_late
std::atomic<int> g_wgmma_one_group{-1};   // set_wna16_wgmma_one_group
std::atomic<int> g_wgmma_pair{0};         // set_wna16_wgmma_pair
std::atomic<int> g_wgmma_producers{0};    // set_wna16_wgmma_producers
std::atomic<int> g_stream_max_stages{0};  // set_wna16_stream_max_stages
std::atomic<int> g_stream_producers{0};   // set_wna16_stream_producers
std::atomic<int> g_fixup_mode{0};         // set_wna16_fixup_mode
std::atomic<int> g_wgmma_natural_x{-1};   // set_wna16_wgmma_natural_x
std::atomic<int> g_wgmma_staged_y{-1};    // set_wna16_wgmma_staged_y
std::atomic<int> g_wgmma_head_first{-1};  // set_wna16_wgmma_head_first
std::atomic<int> g_wgmma_blocks{0};       // set_wna16_wgmma_blocks

Wna16FastPath env_path() {
  const char* e = std::getenv("QLM_W4FAST_PATH");
  if (!e) return Wna16FastPath::Auto;
  if (!std::strcmp(e, "gemv")) return Wna16FastPath::Gemv;
  if (!std::strcmp(e, "tiled")) return Wna16FastPath::Tiled;
  if (!std::strcmp(e, "cublas")) return Wna16FastPath::Cublas;
  if (!std::strcmp(e, "stream")) return Wna16FastPath::Stream;
  if (!std::strcmp(e, "wgmma")) return Wna16FastPath::Wgmma;
  return Wna16FastPath::Auto;
}

}  // namespace

void set_wna16_fast_path(Wna16FastPath path) { g_forced_path.store(static_cast<int>(path)); }
void set_wna16_wgmma_tile(int tile) { g_wgmma_tile.store(tile); }
void set_wna16_wgmma_late(int mode) { g_wgmma_late.store(mode); }
void set_wna16_wgmma_one_group(int mode) { g_wgmma_one_group.store(mode); }
void set_wna16_wgmma_pair(int pair) { g_wgmma_pair.store(pair); }
void set_wna16_wgmma_producers(int producers) { g_wgmma_producers.store(producers); }
void set_wna16_stream_max_stages(int stages) { g_stream_max_stages.store(stages); }
int wna16_stream_max_stages_override() { return g_stream_max_stages.load(); }
void set_wna16_stream_producers(int producers) { g_stream_producers.store(producers); }
int wna16_stream_producers_override() { return g_stream_producers.load(); }
void set_wna16_fixup_mode(int mode) { g_fixup_mode.store(mode); }
int cuda::wna16_fixup_mode() {
  static const int64_t env = env_int("QLM_W4FAST_FIXUP", 0);
  return static_cast<int>(std::clamp<int64_t>(wna16_setting(g_fixup_mode.load(), env, 2), 1, 2));
}

void set_wna16_wgmma_natural_x(int mode) { g_wgmma_natural_x.store(mode); }
void set_wna16_wgmma_staged_y(int mode) { g_wgmma_staged_y.store(mode); }
bool wna16_wgmma_staged_y() {
  static const bool env = env_switch_on("QLM_WGMMA_STAGED_Y");
  return wna16_switch(g_wgmma_staged_y.load(), env);
}
void set_wna16_wgmma_blocks(int blocks) { g_wgmma_blocks.store(blocks); }
int64_t wna16_wgmma_max_blocks() {
  static const int64_t env = env_int("QLM_WGMMA_BLOCKS", 0);
  return wna16_setting(g_wgmma_blocks.load(), env, 0);
}
bool wna16_wgmma_half_tiles() {
  static const bool on = env_switch_on("QLM_WGMMA_HALF_TILES");
  return on;
}
void set_wna16_wgmma_head_first(int mode) { g_wgmma_head_first.store(mode); }
bool wna16_wgmma_head_first() {
  // Off by default: measured once (session 61, H100, 1024 tokens, same binary; docs/w4a16-kernel-notes.md, v8a) it
  // gained 1.2 % on 70b.qkv (258.0 / 257.2 against 260.7 / 260.8 µs, 132 blocks) and 0.6 % on the 128-block grid that
  // now runs there, and was within 0.3 % on the layers whose tiles go whole; not measured at other M.
  static const bool env = env_int("QLM_WGMMA_HEAD_FIRST", 0) != 0;
  return wna16_switch(g_wgmma_head_first.load(), env);
}
// Measured on the H200 (v7n, session 34), µs, x permuted / natural, as two builds: 8b.qkv M = 33 / 64 / 128 23.7 /
// 25.0 / 31.2 vs 21.0 / 22.6 / 28.3, 70b.o 33.7 / 35.1 / 44.0 vs 32.3 / 33.7 / 42.1, 8b.gate_up 47.8 / 51.2 / 72.4 vs
// 45.3 / 48.9 / 70.9; but 70b.gate_up 124.2 / 137.3 / 204.1 / 366 vs 127.6 / 140.5 / 211.5 / 387.5 (M up to 256),
// 70b.down 73.3 / 78.4 vs 75.0 / 79.9, 8b.gate_up M = 256 120.0 vs 122.3: the permutation kernel is a fixed cost per
// call, the shuffles a share of the consumer loop. The build with both kernels (session 35,
// wgmma_natural_x_s35.jsonl, natural_x_bound_s35.jsonl, mode 0 / 1): the same picture (8b.qkv M = 64 25.1 / 22.5,
// 70b.gate_up M = 256 372.5 / 394.4); above 128 tokens (two 128-token m-tiles, each exchanging every word) the
// exchange stays ahead only on the narrow 8b.down (M = 160 / 256 64.6 / 59.1, 64.3 / 61.1) and falls behind on
// 70b.qkv and 70b.o (M = 160 78.6 / 79.8, 67.2 / 67.7), where x is shorter against the weights. Hence mode 2, the
// default: from 17 tokens (33 until v7r, µs at M = 17 / 32 natural vs permuted: 70b.qkv 34.1 / 36.2 vs 36.9 / 39.1,
// 70b.o 31.7 / 32.0 vs 32.8 / 33.6, 8b.o 17.4 / 17.6 vs 18.8 / 19.0) up to 128 below 2e8 weights, up to 256 on layers
// of N <= 4096 below 1e8. And from 1024 tokens where the call runs the 256 x 128 tile on layers of [4e7, 2e8) weights
// (v8a, H100, session 61, µs at 1024, permuted / natural, same binary: 70b.qkv 260.7 / 253.5, 70b.o 189.0 / 177.2,
// 8b.gate_up 325.3 / 319.9, 8b.down 172.3 / 152.0): 64 KB of x a stage against 8 KB of codes, so the exchange's
// instructions are few against the MMAs, and the permutation's 16 MB (K = 8192) copy a call is saved.
bool wna16_wgmma_natural_x(int64_t M, int64_t K, int64_t N, int tile) {
  static const int64_t env = env_int("QLM_WGMMA_NATURAL_X", -1);
  const int set = g_wgmma_natural_x.load();
  const int64_t mode = set >= 0 ? set : env >= 0 ? env : 2;
  if (mode != 2) return mode == 1;
  const double weights = static_cast<double>(K) * static_cast<double>(N);
  if (tile == 12 && M >= 1024 && weights >= 4e7 && weights < 2e8) return true;
  return M >= 17 && ((M <= 128 && weights < 2e8) || (M <= 256 && N <= 4096 && weights < 1e8));
}

// Measured on the H200 (docs/w4a16-kernel-notes.md, v6, runs 5 and 7 of session 16) against the tiled
// kernel on the eight Llama-3 shapes: from M = 33 the 64-token tiles win everywhere (by 10-35 % at 64);
// below, only where a small-token tile does: 16 x 128 tiles at 3 blocks per SM on layers under 3e7 weights
// from M = 16 (8b.o M = 16: 16.3 vs 28.6 us), 32 x 256 tiles on layers of >= 2e8 from M = 17 (70b.gate_up
// M = 32: 144 vs 206), 16 x 256 tiles on layers of >= 4e8 from M = 9 (70b.gate_up M = 16: 125 vs 145).
// Above 64 tokens on layers of >= 6e7 weights the 128 x 192 tiles with three consumer warpgroups (run 2 of
// session 17, M = 96..512: 70b.gate_up M = 128 259 vs 297 us for the 128 x 256 tile, M = 256 456 vs 484;
// 70b.down 161 vs 235, 258 vs 294; 8b.gate_up M = 96 92 vs 103 for 128 x 128; 70b.qkv 76 vs 83; 70b.o
// 71 vs 75); on 8b.down (5.9e7, N = 4096) 128 x 128 stays ahead (M = 96: 77 vs 80).
//
// With the one-group loop (session 20), where the 128 x 256 tile (t6: x loaded once per 256 columns) overtakes
// 128 x 192: 70b.gate_up from M = 512 (749 vs 770 us; 1024: 1404 vs 1521), 70b.down from 768 (600 vs 603;
// 896: 731 vs 762; 640: 546 vs 539 the other way). And below 33 tokens, where the small tiles now overtake the
// tiled kernel on the mid-size layers (µs at M = 17 / 24 / 32): 32 x 256 on 8b.gate_up (1.2e8: 47.3 / 45.0 / 48.7
// vs 52.2 / 52.7 / 53.0) and 70b.o (6.7e7: 33.6 / 35.9 / 39.9 vs 36.1 / 39.4 / 43.1), 16 x 128 on 70b.qkv (8.4e7:
// 48.1 / 48.4 / 48.8 vs 47.1 / 51.3 / 56.2; 32 x 256 there 52.7 / 50.1 / 56.8); 16 x 256 on 70b.o from M = 9
// (25.6 / 27.4 at M = 9 / 16 vs 26.9 / 30.8; the layer is below the stream kernel's bound); 8b.down (5.9e7) keeps
// the tiled kernel (t5 39.5 / 39.6 / 39.8 vs 33.6 / 37.0 / 40.9).
//
// Session 27 (v7d, forced paths over twelve shapes, µs at M = 20 / 24 / 32): the small-token tiles keep only the
// layers where they still beat the tiled kernel. Under 3e7 weights t5 on N <= 4096 (8b.o 16.6 / 16.5 / 16.6 vs
// 18.4 / 18.8 / 19.2) but not wider (8b.qkv 20.6 / 20.6 / 20.8 vs 19.3 / 19.8 / 20.7, 5120 x 5120 22.5 / 22.4 / 22.8
// vs 20.6 / 21.0 / 21.6); on [6e7, 7.5e7) t4 on N >= 8192 (70b.o 32.3 / 32.7 / 33.8 vs 33.4 / 33.8 / 34.4) but not
// narrower (13824 x 5120 41.9 / 42.4 / 43.5 vs 37.9 / 38.3 / 39.0). At M = 9-16 the stream kernel runs by default
// (default_stream_max_m); where it is turned off, t3 keeps only the >= 4e8 layers (70b.gate_up M = 16 96.0 vs 143.8
// tiled; 70b.o 26.3 vs 25.8 and 13824 x 5120 32.9 vs 29.2 went to the tiled kernel).
int wna16_wgmma_rule_tile(int64_t M, int64_t K, int64_t N, int sm_count) {
  const double kn = static_cast<double>(K) * static_cast<double>(N);
  const bool mid = kn >= 6e7 && kn < kWna16FastLargeLayerKN;  // 70b.o-sized
  if (M > 64) {
    // 256 x 128 (t12) where the rule ran 128 x 256 on >= 2e8 weights and 256-token tiles pad no more than 128-token
    // ones (v7r, µs at M = 256 / 512 / 1024: 70b.gate_up 356 / 681 / 1343 vs 368 / 700 / 1380, 70b.down 184 / 320 /
    // 643 vs 191 / 334 / 663; on the [4e7, 2e8) layers within the spread or behind: 8b.down M = 256 66.6 vs 61.1).
    const bool t6 = kn >= 4e8 || (kn >= 2e8 && M >= 192);  // both on >= 2e8 weights
    if (t6 && (M % 256 == 0 || M % 256 > 128)) return 12;
    // 256 x 128 on [4e7, 2e8) too from 1024 tokens (v7y, H100, staged stores, µs at M = 1024 / 1535, t12 vs the
    // rule's tile: 70b.qkv 258 / 374 vs 264 / 388, 70b.o 192 / 292 vs 198 / 322, 8b.gate_up 329 / 512 vs 372 / 569,
    // 8b.down 177 / 341 vs 180 / 284): at whole 256-token multiples, and past 128 of a partial one on N >= 8192
    // (8b.down's 32 column tiles leave 192 tiles on 132 SMs at 1535). At 768 and below it trails on 70b.o and 8b.down.
    // Narrower layers (N < 8192) only where its tiles go whole (v8a, H100: 8b.down at 1280 tokens, 160 tiles on 132
    // SMs, 284.7 µs against 258.9 on 128 x 192; at 1024 its 128 tiles go whole, 173.0 against 197.9).
    if (kn >= 4e7 && M >= 1024 && N >= 8192 && (M % 256 == 0 || M % 256 > 128)) return 12;
    if (kn >= 4e7 && M >= 1024 && N < 8192 && M % 256 == 0 && whole_tiles(cuda::kWna16WgmmaTiles[12], M, N, sm_count))
      return 12;
    return t6 || (kn >= 4e7 && whole_128x256_tiles(M, N, sm_count)) ? 6 : 9;
  }
  if (M >= 33) return kn >= 1e8 ? 8 : 10;  // 64 x 128 with two producers (v7m: 2-7 % ahead of one)
  // Under 3e7 weights on N <= 4096: 64 x 128 with two producers from 17 tokens (8b.o M = 17 / 32: 18.8 / 18.9 us vs
  // 20.8 / 21.0 on t5, v7m); t5 at 16, where the stream kernel is turned off.
  if (kn < 3e7) return N > 4096 ? -1 : M >= 17 ? 10 : M >= 16 ? 5 : -1;
  // 17-32 tokens (v7m): the two-producer tiles, 32 x 256 (t11) on the large layers and 70b.qkv (8192 x 10240: 36.6 /
  // 39.0 us at M = 17 / 32 vs 40.3 / 41.2 on t1), 64 x 128 (t10) on 70b.o (33.0 / 33.8 vs 33.3 / 35.3 on t4).
  if (M >= 17) return kn >= 1e8 ? 11 : mid && N >= 8192 ? 10 : kn >= kWna16FastLargeLayerKN ? 11 : -1;
  if (M >= 9 && kn >= 4e8) return 3;
  return -1;
}

bool wna16_wgmma_compiled() {
#if defined(QLM_WITH_CUDA) && defined(QLM_WITH_CUTLASS)
  return true;
#else
  return false;
#endif
}

namespace {

// The environment's bounds (QLM_W4FAST_*); defaults: none set.
struct RuleBounds {
  int64_t gemv_max = -1, wgmma_min = 0, cublas_min = 0, stream_max = -1, stream_min_kn = 0;
  int64_t gemv_one_token_percent = kWna16Gemv4OneTokenWavePercent;
  bool gemv_first = false;  // QLM_W4FAST_GEMV_FIRST=1
};

Wna16FastPath rule_path(int64_t M, int64_t K, int64_t N, int bits, bool stream_ok, bool wgmma_ok, int sm_count,
                        const RuleBounds& e) {
  // 4-bit, few tokens, a plan of one full wave, where the stream kernel cannot run (or QLM_W4FAST_GEMV_FIRST): the
  // GEMV kernel (unless the environment sets the small-M bounds); one token also where the plan fills the
  // environment's share of the wave (default 70 %).
  const int64_t wave_percent =
      M == 1 ? std::min(e.gemv_one_token_percent, kWna16Gemv4FullWavePercent) : kWna16Gemv4FullWavePercent;
  if (bits == 4 && M <= 8 && (!stream_ok || e.gemv_first) && e.gemv_max < 0 && e.stream_max < 0 &&
      wna16_gemv4_one_wave(K, N, sm_count, wave_percent))
    return Wna16FastPath::Gemv;
  const int64_t gemv_max = e.gemv_max >= 0 ? e.gemv_max : bits == 8 ? kWna16FastGemvMaxM8 : 0;
  // 8-bit weights keep the GEMV kernel at small M (int8 70b.gate_up M = 1: 170 us vs 185 stream, v5d). The
  // environment's bound holds for every layer and width.
  const int64_t stream_max =
      e.stream_max >= 0 ? std::min<int64_t>(e.stream_max, 32) : default_stream_max_m(K, N, bits, e.stream_min_kn);
  if (stream_ok && M <= stream_max) return Wna16FastPath::Stream;
  if (M <= gemv_max) return Wna16FastPath::Gemv;
  const bool wgmma_layer = wgmma_ok && bits == 4;
  const int64_t cublas_min = e.cublas_min > 0 ? e.cublas_min
                             : wgmma_layer    ? wgmma_cublas_min_m(K, N)
                                              : default_cublas_min_m(K, N);
  if (M >= cublas_min) return Wna16FastPath::Cublas;
  if (wgmma_layer && (e.wgmma_min > 0 ? M >= e.wgmma_min : wna16_wgmma_rule_tile(M, K, N, sm_count) >= 0))
    return Wna16FastPath::Wgmma;
  return Wna16FastPath::Tiled;
}

}  // namespace

bool wna16_gemv4_one_wave(int64_t K, int64_t N, int sm_count, int64_t percent) {
  const int64_t n_blocks = (N + 63) / 64, k_tiles = (K + 15) / 16;
  const int64_t slots = int64_t{kWna16Gemv4BlocksPerSm} * sm_count;
  if (sm_count <= 0 || n_blocks > slots) return false;
  const int64_t splits = slots / n_blocks;
  return n_blocks * splits * 100 >= slots * percent && k_tiles / splits >= 8 * 8;
}

bool wna16_gemv4_full_wave(int64_t K, int64_t N, int sm_count) {
  return wna16_gemv4_one_wave(K, N, sm_count, kWna16Gemv4FullWavePercent);
}

Wna16FastPath wna16_fast_path_for(int64_t M, int64_t K, int64_t N, int bits, bool stream_ok, bool wgmma_ok,
                                  int sm_count) {
  static const RuleBounds bounds{env_int("QLM_W4FAST_GEMV_MAX_M", -1),
                                 env_int("QLM_W4FAST_WGMMA_MIN_M", 0),
                                 env_int("QLM_W4FAST_CUBLAS_MIN_M", 0),
                                 env_int("QLM_W4FAST_STREAM_MAX_M", -1),
                                 env_int("QLM_W4FAST_STREAM_MIN_KN", 0),
                                 env_int("QLM_W4FAST_GEMV_ONE_TOKEN_WAVE", kWna16Gemv4OneTokenWavePercent),
                                 env_int("QLM_W4FAST_GEMV_FIRST", 0) != 0};
  static const Wna16FastPath env = env_path();
  const auto forced = static_cast<Wna16FastPath>(g_forced_path.load());
  if (forced != Wna16FastPath::Auto) return forced;
  if (env != Wna16FastPath::Auto) return env;
  return rule_path(M, K, N, bits, stream_ok, wgmma_ok, sm_count, bounds);
}

std::string wna16_fast_path_summary(int64_t K, int64_t N, int bits, bool stream_ok, bool wgmma_ok, int sm_count) {
  const RuleBounds defaults;
  const auto label = [&](int64_t M) -> std::string {
    switch (rule_path(M, K, N, bits, stream_ok, wgmma_ok, sm_count, defaults)) {
      case Wna16FastPath::Stream: return "stream";
      case Wna16FastPath::Gemv: return "gemv";
      case Wna16FastPath::Tiled: return "tiled";
      case Wna16FastPath::Cublas: return "dequant+cuBLAS";
      case Wna16FastPath::Wgmma: {
        const int tile = wna16_wgmma_rule_tile(M, K, N, sm_count);
        // Above 128 tokens on >= 2e8 weights the rule alternates 128 x 256 and 256 x 128 by padding: one range. (On
        // smaller layers 256 x 128 comes only at some M from 1024 on, beside 128 x 192: named as it is.)
        if (M > 128 && (tile == 12 || tile == 6) && static_cast<double>(K) * static_cast<double>(N) >= 2e8)
          return "wgmma 128x256 or 256x128 (less padding)";
        const cuda::Wna16WgmmaTile& t = cuda::kWna16WgmmaTiles[tile];
        return "wgmma " + std::to_string(t.tokens) + "x" + std::to_string(t.columns());
      }
      case Wna16FastPath::Auto: break;
    }
    return "?";
  };
  // Every path holds for a range of M; dequantize + cuBLAS, once reached, for every larger M.
  std::string out = "M ";
  int64_t from = 1;
  std::string current = label(1);
  for (int64_t M = 2; M <= (int64_t{1} << 20); ++M) {  // the bound: every rule reaches cuBLAS far below it
    const std::string next = label(M);
    if (next == current) continue;
    out += (from == M - 1 ? std::to_string(from) : std::to_string(from) + "-" + std::to_string(M - 1)) + " " + current +
           " · ";
    from = M, current = next;
    if (current == "dequant+cuBLAS") break;
  }
  return out + ">= " + std::to_string(from) + " " + current;
}

}  // namespace qlm

#ifdef QLM_WITH_CUDA
#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "cuda/context.h"
#include "cuda/cublas_check.h"
#include "cuda/cuda_check.h"
#include "cuda/data_type.h"
#include "kernels/cuda/linear_run_args.h"
#include "kernels/cuda/wna16_device.h"
#include "kernels/cuda/wna16_fast_kernels.h"
#include "kernels/cuda/wna16_fast_layout.h"
#include "kernels/cuda/wna16_fast_paths.h"
#include "kernels/cuda/wna16_kernels.h"
#include "kernels/cuda/wna16_wgmma.h"
#include "kernels/mp_linear.h"

namespace qlm {

#ifndef QLM_WITH_CUTLASS
namespace cuda {  // no sm_90a kernels in this build: the wgmma path is never usable
bool wna16_wgmma_built() { return false; }
cudaError_t launch_wna16_wgmma_permute_x(const void*, int64_t, int64_t, const int32_t*, int64_t, void*, bool,
                                         cudaStream_t) {
  return cudaErrorNotSupported;
}
bool wna16_wgmma_usable(const Wna16FastArgs&, int) { return false; }
int64_t wna16_wgmma_stage_count(const Wna16FastArgs&, int64_t, int, int) { return 0; }
int64_t wna16_wgmma_tile_count(const Wna16FastArgs&, int64_t, int, int) { return 0; }
int64_t wna16_wgmma_max_segments(const Wna16FastArgs&, int64_t, int, int, int) { return 0; }
int wna16_wgmma_max_clusters(const Wna16FastArgs&, int, int) { return 0; }
cudaError_t launch_wna16_wgmma_gemm(const Wna16FastArgs&, const void*, int64_t, int64_t, int, int, int, int, float*,
                                    unsigned*, bool, bool, bool, bool, const float*, void*, bool, cudaStream_t) {
  return cudaErrorNotSupported;
}
}  // namespace cuda
#endif

namespace cuda {
bool wna16_wgmma_late(const Wna16FastArgs& w, int tokens) {
  // Run in session 18: correct, not faster (docs/w4a16-kernel-notes.md, v6): off unless QLM_WGMMA_LATE=1 or
  // set_wna16_wgmma_late(1).
  static const bool env = env_int("QLM_WGMMA_LATE", 0) != 0;
  return wna16_switch(g_wgmma_late.load(), env) && tokens <= 32 && w.tiles_per_group % kWna16WgmmaStageTiles == 0;
}

bool wna16_wgmma_one_group(const Wna16FastArgs& w) {
  // Measured in session 20 (docs/w4a16-kernel-notes.md, v6f): ahead of the general loop on every layer and M where
  // the wgmma path runs (1.02-1.34x), so on by default; QLM_WGMMA_ONE_GROUP=0 or set_wna16_wgmma_one_group(0)
  // turns it off.
  static const bool env = env_switch_on("QLM_WGMMA_ONE_GROUP");
  return wna16_switch(g_wgmma_one_group.load(), env) && wna16_wgmma_stages_in_one_group(w.tiles_per_group, w.k_tiles);
}

int wna16_wgmma_pair() {
  static const int64_t env = env_int("QLM_WGMMA_PAIR", 0);
  return wna16_setting(g_wgmma_pair.load(), env, 1) >= 2 ? 2 : 1;
}

int wna16_wgmma_producers() {
  static const int64_t env = env_int("QLM_WGMMA_PRODUCERS", 0);
  return static_cast<int>(std::clamp<int64_t>(wna16_setting(g_wgmma_producers.load(), env, 4), 1, 4));
}

int wna16_wgmma_max_stages(int tokens, int columns) {
  static const int64_t env = env_int("QLM_WGMMA_MAX_STAGES", 0);
  if (env > 0) return static_cast<int>(std::clamp<int64_t>(env, 2, 8));
  return wna16_wgmma_default_stages(tokens, columns);
}

int wna16_wgmma_tile_for(int64_t M, int64_t K, int64_t N, int sm_count) {
  const auto valid = [](int64_t i) { return i >= 0 && i < static_cast<int64_t>(std::size(kWna16WgmmaTiles)); };
  static const int64_t env_tile = env_int("QLM_WGMMA_TILE", -1);
  if (const int set = g_wgmma_tile.load(); valid(set)) return set;
  if (valid(env_tile)) return static_cast<int>(env_tile);
  const int tile = wna16_wgmma_rule_tile(M, K, N, sm_count);
  if (tile >= 0) return tile;
  // The path forced where the rule would not run it: the 64-token tiles.
  return static_cast<double>(K) * static_cast<double>(N) >= 2e8 ? 0 : 1;
}
}  // namespace cuda

namespace {

std::optional<std::string> can_implement(const MPLinearLayerConfig& c) {
  if (c.device.type != DeviceType::CUDA) return "runs on CUDA only";
  if (c.capability < 80)
    return fmt::format("needs compute capability >= 8.0 (mma.sync bf16); the device has {}",
                       c.capability == 0 ? std::string("none (unknown)") : std::to_string(c.capability));
  const int bits = c.weight_type.bits;
  if (bits != 4 && bits != 8)
    return fmt::format("weight type {} has {} bits; supported: 4, 8 (cuda_wna16 runs the others)", c.weight_type.name(),
                       bits);
  if (c.act_dtype != DType::F16 && c.act_dtype != DType::BF16)
    return fmt::format("activation dtype {} is not F16 or BF16 (cuda_wna16 runs F32)", dtype_name(c.act_dtype));
  if (c.group_size != -1 && c.group_size <= 0) return fmt::format("group size {} is invalid", c.group_size);
  if (c.K_p <= 0 || c.N_p <= 0) return fmt::format("empty partition K_p={} N_p={}", c.K_p, c.N_p);
  if (c.K_p > INT_MAX / 4 || c.N_p > INT_MAX / 4)
    return fmt::format("partition K_p={} N_p={} exceeds the kernel's int range", c.K_p, c.N_p);
  return std::nullopt;
}

class CudaWna16FastKernel final : public MPLinearKernel {
 public:
  explicit CudaWna16FastKernel(const MPLinearLayerConfig& config) : cfg_(config) { std::ranges::fill(wgmma_ok_, -1); }

  std::string name() const override { return "cuda_wna16_fast"; }

  void prepare(WNA16Weights weights) override {
    if (weights.K != cfg_.K_p || weights.N != cfg_.N_p || weights.weight_type.bits != cfg_.weight_type.bits)
      fail("kernel.weights", {}, "this is a bug in the format's conversion to the standard form",
           "cuda_wna16_fast: weights are {}-bit K={} N={}; the layer expects {}-bit K_p={} N_p={}",
           weights.weight_type.bits, weights.K, weights.N, cfg_.weight_type.bits, cfg_.K_p, cfg_.N_p);
    const Wna16FastLayout L = pack_wna16_fast(weights, cfg_.act_dtype == DType::BF16);
    const Device dev = cfg_.device;
    codes_ = Tensor::from_vector(L.codes, {static_cast<int64_t>(L.codes.size())}).to_device(dev);
    scales_ = Tensor::from_vector(L.scales, {static_cast<int64_t>(L.scales.size())}).to_device(dev);
    if (!L.zeros.empty()) zeros_ = Tensor::from_vector(L.zeros, {static_cast<int64_t>(L.zeros.size())}).to_device(dev);
    row_source_ = Tensor::from_vector(L.row_source, {L.rows}).to_device(dev);
    a_.codes = codes_.raw_data();
    a_.scales = scales_.raw_data();
    a_.zeros = zeros_.defined() ? zeros_.raw_data() : nullptr;
    a_.row_source = row_source_.data<int32_t>();
    a_.zero_const = L.zero_const;
    a_.bits = L.bits;
    a_.bf16 = L.bf16;
    a_.N = L.N;
    a_.N_pad = L.N_pad;
    a_.n_blocks = L.n_blocks;
    a_.k_tiles = L.k_tiles;
    a_.tiles_per_group = L.tiles_per_group;
    a_.rows = L.rows;
    identity_ = L.identity_rows;
    // The split-K counters of every path up to two m-tiles (the decode step's sizes), zeroed now: made later
    // inside a CUDA graph's capture, their zeroing would become a memset node of the graph, replayed
    // before each call (it was: 4 per layer in the 8B decode step captured right after a long prefill).
    // (a_.n_blocks, the 64-column blocks, bounds every path's column tiles.)
    counters_for(2 * a_.n_blocks);
    prepared_ = true;
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_args(x, y, bias);
    if (!prepared_)
      fail("kernel.args", {}, "call prepare() before run()", "cuda_wna16_fast: run() before the weights were prepared");
    cuda::Context& ctx = cuda::context(cfg_.device.index);
    const float* b = bias ? bias->data<float>() : nullptr;
    const Wna16FastPath path = path_for(M);
    if (path == Wna16FastPath::Cublas) {
      run_cublas(ctx, x, y, b, M);
      return;
    }
    // The wgmma path's tile (the rule's, or the one forced) and whether x goes to it permuted or in its own order.
    const int tile = path == Wna16FastPath::Wgmma ? cuda::wna16_wgmma_tile_for(M, cfg_.K_p, cfg_.N_p, sm_count()) : -1;
    const bool natural_x = tile >= 0 && wgmma_natural_x(M, tile);
    if (tile >= 0 && !natural_x) {
      run_wgmma_permuted(ctx, x, M, tile, b, y);
      return;
    }
    const void* xk = x.raw_data();
    int64_t ldx = cfg_.K_p;
    Tensor xg;
    // The tiled kernel copies x in 16-byte pieces and the stream and wgmma kernels by tensor maps: rows must start
    // 16-byte aligned.
    const bool aligned = reinterpret_cast<uintptr_t>(xk) % 16 == 0 && cfg_.K_p % 8 == 0;
    const bool copies_x = path == Wna16FastPath::Tiled || path == Wna16FastPath::Stream || path == Wna16FastPath::Wgmma;
    if (!identity_ || (copies_x && !aligned)) {
      xg = Tensor::empty({M, a_.rows}, cfg_.act_dtype, cfg_.device);
      QLM_CUDA_CHECK(
          cuda::launch_wna16_fast_gather(x.raw_data(), M, cfg_.K_p, a_.row_source, a_.rows, xg.raw_data(), ctx.stream));
      xk = xg.raw_data();
      ldx = a_.rows;
    }
    if (natural_x) {
      run_wgmma(ctx, xk, ldx, true, M, tile, b, y);
      return;
    }
    if (path == Wna16FastPath::Tiled) {
      run_tiled(ctx, xk, ldx, M, b, y);
      return;
    }
    if (path == Wna16FastPath::Stream) {
      run_stream(ctx, xk, ldx, M, b, y);
      return;
    }
    run_gemv(ctx, xk, ldx, M, b, y);
  }

  size_t weight_bytes() const override {
    return codes_.nbytes() + scales_.nbytes() + (zeros_.defined() ? zeros_.nbytes() : 0);
  }
  std::string path(int64_t M) const override {
    switch (path_for(M)) {
      case Wna16FastPath::Gemv: return "gemv";
      case Wna16FastPath::Tiled: return "tiled";
      case Wna16FastPath::Stream: return "stream";
      case Wna16FastPath::Wgmma: return "wgmma";
      case Wna16FastPath::Cublas: return "dequant+cublas";
      case Wna16FastPath::Auto: break;
    }
    return "?";
  }

 private:
  // Whether the stream and wgmma grids line up with their tiles (wna16_aligned_grid; QLM_W4FAST_ALIGNED_GRID=0: the
  // largest grid instead, as before session 31).
  static bool aligned_grids() {
    static const bool on = env_switch_on("QLM_W4FAST_ALIGNED_GRID");
    return on;
  }
  // The share of the largest grid an aligned one must keep, per mille: QLM_W4FAST_ALIGNED_KEEP (tuning, every
  // layer), else the path's default.
  static int64_t aligned_keep(int64_t fallback) {
    static const int64_t keep = env_int("QLM_W4FAST_ALIGNED_KEEP", 0);
    return keep > 0 ? std::min<int64_t>(keep, 1000) : fallback;
  }

  // m-tiles of the stream kernel for M tokens: one up to 8 on every layer. Sessions 18-37 ran M = 6-8 on two m-tiles
  // on layers of >= 2e8 weights (v5j: one m-tile was behind there); since the one-m-tile kernel's producers and ring
  // work (v7k-v7m) it is well ahead (v7r, µs at M = 6 / 8, one m-tile vs two: 70b.gate_up 65.3 / 67.3 vs 81.7 /
  // 82.0, 70b.down 34.3 / 35.3 vs 43.5 / 43.5). Tuning: QLM_W4FAST_STREAM_ONE_MT_MAX=n (1-8) ends one m-tile at n,
  // QLM_W4FAST_STREAM_MIN_MT=2 runs every M <= 8 on two.
  int stream_mt(int64_t M) const {
    static const int64_t min_mt = env_int("QLM_W4FAST_STREAM_MIN_MT", 1);
    static const int64_t one_mt_max = env_int("QLM_W4FAST_STREAM_ONE_MT_MAX", 0);
    const int64_t one_max = one_mt_max > 0 ? std::min<int64_t>(one_mt_max, 8) : 8;
    const int mt = M <= one_max ? 1 : M <= 16 ? 2 : 4;
    return min_mt >= 4 ? 4 : min_mt >= 2 ? std::max(mt, 2) : mt;
  }

  // One persistent block per multiprocessor (never more blocks than k-stages), partial sums only for
  // tiles split between blocks.
  void run_stream(cuda::Context& ctx, const void* xk, int64_t ldx, int64_t M, const float* b, Tensor& y) const {
    const int mt = stream_mt(M);
    // QLM_W4FAST_STREAM_BLOCKS=n (tuning): a grid of at most n blocks, e.g. one or two short of the SM count so
    // that the kernels around it keep multiprocessors of their own (the kernel's cost inside the model, notes v7f).
    static const int64_t max_blocks = env_int("QLM_W4FAST_STREAM_BLOCKS", 0);
    const int64_t sms = std::max(1, ctx.sm_count);
    const int64_t grid = max_blocks > 0 ? std::min(max_blocks, sms) : sms;
    const int64_t stages = cuda::wna16_stream_stage_count(a_);
    const int64_t n_tiles = (a_.N_pad + cuda::kWna16TiledCols - 1) / cuda::kWna16TiledCols;
    const int64_t cap = std::min(grid, stages);
    // Fewer blocks from 2 tokens on small layers (wna16_stream_small_grid); QLM_W4FAST_STREAM_SMALL_GRID=permille
    // sets the share of the SMs (0: off, the aligned grid).
    static const int64_t small_grid = env_int("QLM_W4FAST_STREAM_SMALL_GRID", kWna16StreamSmallGridPermille);
    const int blocks = static_cast<int>([&]() -> int64_t {
      if (!aligned_grids() || max_blocks > 0) return cap;
      if (small_grid > 0 && wna16_stream_small_grid_layer(M, cfg_.K_p, cfg_.N_p))
        if (const int64_t g = wna16_stream_small_grid(n_tiles, cap, small_grid); g > 0) return g;
      return wna16_aligned_grid(n_tiles, cap, aligned_keep(wna16_stream_aligned_keep(cfg_.K_p, cfg_.N_p)));
    }());
    const int64_t slots = cuda::wna16_stream_max_segments(a_, M, blocks);
    Tensor ws = Tensor::empty({n_tiles * slots * 8 * mt * cuda::kWna16TiledCols}, DType::F32, cfg_.device);
    // Programmatic dependent launch: the first ring of weights is requested while the previous kernel ends
    // (QLM_W4FAST_PDL=0: off).
    static const bool pdl = env_switch_on("QLM_W4FAST_PDL");
    // x by one 2-D bulk-tensor copy per stage where a tensor map can be made (QLM_W4FAST_STREAM_XMAP=0: one copy
    // per token row).
    static const bool x_boxes = env_switch_on("QLM_W4FAST_STREAM_XMAP");
    QLM_CUDA_CHECK(cuda::launch_wna16_stream_gemm(a_, xk, ldx, M, mt, blocks, ws.data<float>(), counters_for(n_tiles),
                                                  cuda::wna16_fixup_mode() == 2, b, y.raw_data(), pdl, x_boxes,
                                                  ctx.stream));
  }

  // The wgmma path with x first permuted into the code words' k order (wna16_wgmma.h).
  void run_wgmma_permuted(cuda::Context& ctx, const Tensor& x, int64_t M, int tile, const float* b, Tensor& y) const {
    Tensor xp = Tensor::empty({M, a_.rows}, cfg_.act_dtype, cfg_.device);
    const bool vectors = identity_ && reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 && cfg_.K_p % 8 == 0;
    // Programmatic dependent launch (QLM_WGMMA_PDL, as for the GEMM): the permutation waits for the previous kernel
    // first; the GEMM's blocks request their first ring of weights while it runs.
    QLM_CUDA_CHECK(cuda::launch_wna16_wgmma_permute_x(x.raw_data(), M, cfg_.K_p, vectors ? nullptr : a_.row_source,
                                                      a_.rows, xp.raw_data(), wgmma_pdl(), ctx.stream));
    run_wgmma(ctx, xp.raw_data(), a_.rows, false, M, tile, b, y);
  }

  // Whether a wgmma call of M tokens on `tile` takes x in its own k order: the choice (wna16_wgmma_natural_x) where
  // the call runs the one-group loop, which alone has that variant.
  bool wgmma_natural_x(int64_t M, int tile) const {
    return wna16_wgmma_natural_x(M, cfg_.K_p, cfg_.N_p, tile) && cuda::wna16_wgmma_one_group(a_) &&
           !cuda::wna16_wgmma_late(a_, cuda::kWna16WgmmaTiles[tile].tokens);
  }

  static bool wgmma_pdl() {
    static const bool on = env_switch_on("QLM_WGMMA_PDL");
    return on;
  }

  // A persistent grid (per_sm blocks per multiprocessor) over the k-stages of all (m-tile, column-tile) pairs. x in
  // packed-row order: permuted into the code words' k order (natural false), else in its own (wna16_wgmma.h).
  void run_wgmma(cuda::Context& ctx, const void* xk, int64_t ldx, bool natural, int64_t M, int tile, const float* b,
                 Tensor& y) const {
    // Programmatic dependent launch (QLM_WGMMA_PDL=0: plain stream order): the GEMM's blocks request their first
    // ring of weights while the previous kernel ends, x after waiting for it.
    const bool pdl = wgmma_pdl();
    const cuda::Wna16WgmmaTile& t = cuda::kWna16WgmmaTiles[tile];
    // Column tiles in pairs sharing each token tile (clusters of two blocks) where set so and the pair's clusters fit
    // on the device at all.
    int pair = cuda::wna16_wgmma_pair();
    const int max_clusters = pair > 1 ? cuda::wna16_wgmma_max_clusters(a_, tile, pair) : 0;
    if (max_clusters < 1) pair = 1;
    // Every cluster gets at least min_stages k-stages (fewer partial sums on small layers).
    // (v6: 8 rather than 1 takes 8b.o at M = 48 from 33 to 25 us, no change on the large layers).
    static const int64_t min_stages = std::max<int64_t>(1, env_int("QLM_WGMMA_MIN_STAGES", 8));
    const int64_t stages = cuda::wna16_wgmma_stage_count(a_, M, tile, pair);
    const int64_t resident =
        pair > 1 ? max_clusters : int64_t{std::max(1, ctx.sm_count)} * t.per_sm;  // clusters (blocks) at once
    const int64_t max_blocks = wna16_wgmma_max_blocks();
    const int64_t cap =
        std::clamp<int64_t>(stages / min_stages, 1, max_blocks > 0 ? std::min(max_blocks, resident) : resident);
    // Stream-K units: (m-tile, group of `pair` column tiles).
    const int64_t tiles = cuda::wna16_wgmma_tile_count(a_, M, tile, pair), units = tiles / pair;
    const int blocks =
        pair * static_cast<int>(aligned_grids() && max_blocks <= 0
                                    ? wna16_wgmma_grid(units, cap, aligned_keep(875), wna16_wgmma_half_tiles())
                                    : cap);
    const int64_t slots = cuda::wna16_wgmma_max_segments(a_, M, tile, blocks, pair);
    Tensor ws = Tensor::empty({tiles * slots * t.tokens * t.columns()}, DType::F32, cfg_.device);
    const bool gemm_pdl = pdl && wna16_wgmma_pdl_grid(blocks, t.per_sm, ctx.sm_count);
    const bool staged_y = wna16_wgmma_staged_y() && cuda::wna16_wgmma_can_stage_y(a_, y.raw_data());
    QLM_CUDA_CHECK(cuda::launch_wna16_wgmma_gemm(a_, xk, ldx, M, tile, blocks, pair, cuda::wna16_wgmma_producers(),
                                                 ws.data<float>(), counters_for(tiles), cuda::wna16_fixup_mode() == 2,
                                                 natural, staged_y, wna16_wgmma_head_first(), b, y.raw_data(), gemm_pdl,
                                                 ctx.stream));
  }

  bool wgmma_usable(int64_t M) const {
    if (cfg_.capability != 90 || a_.bits != 4 || !cuda::wna16_wgmma_built()) return false;
    const int tile = cuda::wna16_wgmma_tile_for(M, cfg_.K_p, cfg_.N_p, sm_count());
    int& usable = wgmma_ok_[tile];
    if (usable < 0) usable = cuda::wna16_wgmma_usable(a_, tile) ? 1 : 0;
    return usable == 1;
  }

  bool stream_usable(int64_t M) const {
    if (M > 32 || cfg_.capability < 90 || a_.N_pad / cuda::kWna16TiledCols >= 65535) return false;
    const int mt = stream_mt(M);
    int& usable = stream_ok_[mt == 1 ? 0 : mt == 2 ? 1 : 2];
    if (usable < 0) usable = cuda::wna16_stream_usable(a_, mt) ? 1 : 0;
    return usable == 1;
  }

  void run_tiled(cuda::Context& ctx, const void* xk, int64_t ldx, int64_t M, const float* b, Tensor& y) const {
    const int mt = cuda::wna16_tiled_mt(M);
    const int64_t tm = 8 * mt;
    const int64_t m_tiles = (M + tm - 1) / tm;
    const int64_t n_tiles = (a_.N_pad + cuda::kWna16TiledCols - 1) / cuda::kWna16TiledCols;
    const int splits =
        plan_tiled_splits(int64_t{std::max(1, ctx.sm_count)} * tiled_occupancy(mt), m_tiles * n_tiles, std::min(M, tm));
    Tensor ws;
    unsigned* counters = nullptr;
    if (splits > 1) {
      ws = Tensor::empty({splits * m_tiles * n_tiles * tm * cuda::kWna16TiledCols}, DType::F32, cfg_.device);
      counters = counters_for(m_tiles * n_tiles);
    }
    QLM_CUDA_CHECK(cuda::launch_wna16_tiled_gemm(a_, xk, ldx, M, mt, splits, splits > 1 ? ws.data<float>() : nullptr,
                                                 counters, b, y.raw_data(), ctx.stream));
  }

  // Resident blocks per multiprocessor of the tiled instantiation for mt (0: cannot launch).
  int tiled_occupancy(int mt) const {
    int& occ = tiled_occ_[mt == 1 ? 0 : mt == 2 ? 1 : mt == 4 ? 2 : 3];
    if (occ < 0) occ = cuda::wna16_tiled_occupancy(a_, mt);
    return occ;
  }

  // Split-K for the tiled kernel: minimises a byte-time model. Each wave of resident blocks streams
  // its blocks' weights; more splits shorten the blocks and fill the last wave better, but add
  // partial sums (f32, written and read back) per split and tile. Every split keeps >= 2 stages.
  int plan_tiled_splits(int64_t slots, int64_t tiles, int64_t rows) const {
    const double col_bytes = static_cast<double>(a_.k_tiles) * 16.0 * a_.bits / 8.0;  // per column
    const double tile_bytes = col_bytes * cuda::kWna16TiledCols;
    const int64_t max_splits = std::clamp<int64_t>(a_.k_tiles / 16, 1, 64);
    int best = 1;
    double best_cost = 0;
    for (int64_t s = 1; s <= max_splits; ++s) {
      const int64_t blocks = tiles * s;
      const int64_t waves = (blocks + slots - 1) / slots;
      double cost = static_cast<double>(waves) * static_cast<double>(slots) * tile_bytes / static_cast<double>(s);
      if (s > 1) cost += 2.0 * 4.0 * static_cast<double>(s * tiles * rows * cuda::kWna16TiledCols);
      if (s == 1 || cost < best_cost * 0.98) {
        best_cost = cost;
        best = static_cast<int>(s);
      }
    }
    return best;
  }

  void run_cublas(cuda::Context& ctx, const Tensor& x, Tensor& y, const float* b, int64_t M) const {
    const int64_t K = cfg_.K_p, N = cfg_.N_p;
    Tensor wd = Tensor::empty({K, a_.N_pad}, cfg_.act_dtype, cfg_.device);
    QLM_CUDA_CHECK(cuda::launch_wna16_fast_dequant(a_, wd.raw_data(), ctx.stream));
    if (b) QLM_CUDA_CHECK(cuda::launch_wna16_bias_rows(b, M, N, y.raw_data(), wna16_act(cfg_.act_dtype), ctx.stream));
    const float alpha = 1.0f, beta = b ? 1.0f : 0.0f;
    const cudaDataType_t type = cuda::data_type_of(cfg_.act_dtype);
    QLM_CUBLAS_CHECK(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST));
    QLM_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                  static_cast<int>(K), &alpha, wd.raw_data(), type, static_cast<int>(a_.N_pad),
                                  x.raw_data(), type, static_cast<int>(K), &beta, y.raw_data(), type,
                                  static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // The GEMV-shaped kernels: 4-bit codes on wna16_gemv4_kernels.cu (late scaling, 8 warps, PDL), 8-bit on
  // wna16_fast_kernels.cu. Tuning: QLM_W4FAST_GEMV_SPLITS=n (> 0) fixes the split count.
  void run_gemv(cuda::Context& ctx, const void* xk, int64_t ldx, int64_t M, const float* b, Tensor& y) const {
    const int mt = cuda::wna16_fast_mt(M);
    const int64_t m_tiles = (M + 8 * mt - 1) / (8 * mt);
    const bool v4 = a_.bits == 4;
    const bool zp = a_.zeros != nullptr;
    static const int64_t forced_splits = env_int("QLM_W4FAST_GEMV_SPLITS", 0);
    int splits = 0;
    if (forced_splits > 0) {
      splits = static_cast<int>(std::min<int64_t>(forced_splits, a_.k_tiles));
    } else if (v4) {
      // One wave where the column blocks fit in the resident slots (the rule's full-wave plans), else waves.
      const int occupancy = cuda::wna16_gemv4_occupancy(a_.bf16, mt, zp);
      const int64_t slots = int64_t{std::max(1, ctx.sm_count)} * occupancy, base = m_tiles * a_.n_blocks;
      const int64_t max_splits = std::clamp<int64_t>(a_.k_tiles / (cuda::kWna16Gemv4Warps * 4), 1, 64);
      splits = base <= slots ? static_cast<int>(std::min(slots / base, max_splits))
                             : plan_splits(ctx.sm_count, m_tiles, occupancy, cuda::kWna16Gemv4Warps, 4);
    } else {
      splits = plan_splits(ctx.sm_count, m_tiles, cuda::wna16_fast_occupancy(a_.bits, a_.bf16, mt, zp),
                           cuda::kWna16FastWarps, 8);
    }
    Tensor ws;
    unsigned* counters = nullptr;
    if (splits > 1) {
      ws = Tensor::empty({splits * m_tiles * a_.n_blocks * 512 * mt}, DType::F32, cfg_.device);
      counters = counters_for(m_tiles * a_.n_blocks);
    }
    float* wsp = splits > 1 ? ws.data<float>() : nullptr;
    QLM_CUDA_CHECK(
        v4 ? cuda::launch_wna16_gemv4(a_, xk, ldx, M, splits, wsp, counters, b, y.raw_data(), ctx.stream)
           : cuda::launch_wna16_fast_gemm(a_, xk, ldx, M, splits, wsp, counters, b, y.raw_data(), ctx.stream));
  }

  // Split-K: enough blocks for several waves of resident blocks (occupancy per multiprocessor) with little tail,
  // every warp of `warps` keeping at least `min_tiles` k-tiles.
  int plan_splits(int sm_count, int64_t m_tiles, int occupancy, int warps, int min_tiles) const {
    const int64_t slots = std::max(1, sm_count) * int64_t{std::max(1, occupancy)};
    const int64_t base = m_tiles * a_.n_blocks;
    const int64_t max_splits = std::clamp<int64_t>(a_.k_tiles / (int64_t{warps} * min_tiles), 1, 64);
    int best = 1;
    double best_score = -1;
    for (int64_t s = 1; s <= max_splits; ++s) {
      const int64_t blocks = base * s;
      const int64_t waves = (blocks + slots - 1) / slots;
      const double eff = static_cast<double>(blocks) / static_cast<double>(waves * slots);
      const double score = eff - 0.01 * static_cast<double>(s);
      if (score > best_score + 1e-9) {
        best_score = score;
        best = static_cast<int>(s);
      }
    }
    return best;
  }

  // Zeroed split-K counters (the kernel leaves them zero), grown on demand. Outgrown ones are kept:
  // a CUDA graph captured earlier (the decode step) still uses them, and their memory must not be
  // handed to another tensor.
  unsigned* counters_for(int64_t n) const {
    if (!counters_.defined() || counters_.numel() < n) {
      if (counters_.defined()) outgrown_counters_.push_back(counters_);
      counters_ = Tensor::zeros({std::max<int64_t>(n, 1024)}, DType::U32, cfg_.device);
    }
    return counters_.data<uint32_t>();
  }

  int64_t check_args(const Tensor& x, const Tensor& y, const Tensor* bias) const {
    return cuda::check_linear_run_args(
        {"cuda_wna16_fast", cfg_.device, cfg_.act_dtype, cfg_.K_p, cfg_.N_p, INT_MAX / 64}, x, y, bias);
  }

  // The rule's path for M (wna16_fast_paths.h), moved to one that can run this layer: the tiled
  // kernel needs a resident block and fewer than 65535 column tiles, the GEMV fewer than 65535
  // blocks along y, the stream kernel sm_90 and M <= 32 (else tiled), the wgmma kernel sm_90 and 4-bit
  // weights in a build with the sm_90a kernels (else tiled).
  Wna16FastPath path_for(int64_t M) const {
    const bool wgmma_ok = wgmma_usable(M);
    Wna16FastPath path = wna16_fast_path_for(M, cfg_.K_p, cfg_.N_p, cfg_.weight_type.bits, true, wgmma_ok, sm_count());
    if (path == Wna16FastPath::Wgmma) {
      if (wgmma_ok) return path;
      path = Wna16FastPath::Tiled;  // forced, but it cannot run here (not sm_90a, 8-bit, no sm_90a kernels)
    }
    if (path == Wna16FastPath::Stream && !stream_usable(M)) {
      path = wna16_fast_path_for(M, cfg_.K_p, cfg_.N_p, cfg_.weight_type.bits, false, wgmma_ok, sm_count());
      if (path == Wna16FastPath::Stream) path = Wna16FastPath::Tiled;  // forced, but it cannot run here
    }
    if (path == Wna16FastPath::Tiled &&
        (tiled_occupancy(cuda::wna16_tiled_mt(M)) == 0 || a_.N_pad / cuda::kWna16TiledCols >= 65535))
      path = Wna16FastPath::Gemv;
    if (path == Wna16FastPath::Gemv && a_.n_blocks >= 65535) path = Wna16FastPath::Cublas;  // grid.y limit
    return path;
  }

  int sm_count() const {
    if (sm_count_ < 0) sm_count_ = cuda::context(cfg_.device.index).sm_count;
    return sm_count_;
  }

  MPLinearLayerConfig cfg_;
  mutable int sm_count_ = -1;
  Tensor codes_, scales_, zeros_, row_source_;
  mutable Tensor counters_;
  mutable std::vector<Tensor> outgrown_counters_;
  mutable int tiled_occ_[4] = {-1, -1, -1, -1};
  mutable int stream_ok_[3] = {-1, -1, -1};
  mutable int wgmma_ok_[std::size(cuda::kWna16WgmmaTiles)];  // per kWna16WgmmaTiles entry: -1 unknown, 0, 1
  cuda::Wna16FastArgs a_;
  bool identity_ = false;
  bool prepared_ = false;
};

// Multiprocessors of `device` if it is a CUDA device present here, else 0 (a plan made for another machine).
int present_sm_count(const Device& device) {
  int n = 0;
  if (device.is_cpu() || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device.index) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

const MPKernelRegistrar kRegisterCudaWna16Fast{{
    .name = "cuda_wna16_fast",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 20,
    .can_implement = can_implement,
    .create = [](const MPLinearLayerConfig& c) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<CudaWna16FastKernel>(c);
    },
    // The rule's paths for this layer on the planned device (the stream kernel needs sm_90; the wgmma
    // kernel sm_90 and this build's sm_90a kernels; the 4-bit GEMV's full-wave test the device's
    // multiprocessors, where that device is present).
    .paths =
        [](const MPLinearLayerConfig& c) {
          return wna16_fast_path_summary(c.K_p, c.N_p, c.weight_type.bits, c.capability >= 90,
                                         c.capability == 90 && wna16_wgmma_compiled(), present_sm_count(c.device));
        },
}};

}  // namespace

int wna16_wgmma_resident_clusters(int64_t k_tiles, int64_t n_blocks, int64_t tiles_per_group, bool bf16, int tile,
                                  int pair) {
  if (!wna16_wgmma_compiled() || tile < 0 || tile >= static_cast<int>(std::size(cuda::kWna16WgmmaTiles))) return 0;
  cuda::Wna16FastArgs w;
  w.bits = 4, w.bf16 = bf16, w.k_tiles = k_tiles, w.n_blocks = n_blocks, w.tiles_per_group = tiles_per_group;
  return cuda::wna16_wgmma_max_clusters(w, tile, pair);
}
}  // namespace qlm
#else
namespace qlm {
int wna16_wgmma_resident_clusters(int64_t, int64_t, int64_t, bool, int, int) { return 0; }
}  // namespace qlm
#endif
