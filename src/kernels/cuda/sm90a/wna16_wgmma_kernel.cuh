// The wgmma GEMM kernel of `cuda_wna16_fast` for 4-bit weights (declarations and layout: wna16_wgmma.h),
// sm_90a only. Included by the tile units wna16_wgmma_tiles_*.cu: each instantiates the kernels of its
// tile configurations (QLM_WGMMA_DEFINE_TILE), so the ~60 kernels compile in parallel; everything here has
// internal linkage, every kernel lives in exactly one unit. wna16_wgmma.cu dispatches to the tiles.
//
// Block: one or two producer warps (or a producer warpgroup, PW = 4, that hands its registers to the consumers
// with setmaxnreg) and two consumer warpgroups over a tile of 128 * BPW output columns (2 * BPW
// column blocks of 64; warpgroup i owns blocks BPW i .. BPW i + BPW - 1) x TN tokens; PER_SM blocks per
// multiprocessor (kWna16WgmmaTiles). Per stage of 8 k-tiles the producer issues the x tile (two tensor-map
// boxes of 64 k x TN tokens, 128-byte swizzle, zeros outside x), the codes (one `cp.async.bulk` per
// column block: the fast layout is contiguous along k) and the scales / zeros of the groups the stage
// touches (one copy per group), all completing on full[s]; empty[s] counts the 8 consumer warps.
//
// Consumers: warp j of a warpgroup dequantizes rows 16j..16j+15 (tile j) of each of its column blocks
// (the v1 conversion; scales reloaded per group; with x in its own k order, NK, the code words go to the MMA's k order
// first, natural_k_word), then the warpgroup issues one m64nTNk16 wgmma per
// column block with those registers as A and the x tile as B. Two A register sets: k-tile kt + 1 is
// dequantized while kt's MMAs run (wait_group 1), and a stage's last MMAs overlap the dequantization of
// the next stage's first k-tile. No MMA sits behind a branch (ptxas would serialize them all): k-tiles
// past K are multiplied by zero x, column blocks past N are computed and never stored. Work split and
// partial sums: stream-K over the k-stages of all (m-tile, column-tile) pairs, as in
// wna16_stream_kernels.cu. Epilogue (staged_y, the default): the consumers keep the ring slot of a segment's last
// stage, transpose the tile's y into token rows there and write whole 16-byte pieces of them (store_y_staged).
//
// Pairs (pair = 2, launched as clusters of two blocks): the two blocks of a cluster take column tiles 2p and 2p + 1
// of the same m-tile over the same k-stages (stream-K over (m-tile, p) units, per cluster), so they need the same
// token tile: each block's producer copies one of the stage's two x boxes and multicasts it into both blocks, halving
// the x traffic from L2. A block's slot is refilled (the peer's copy lands in it too) only when the consumers of both
// blocks have released it: empty[s] counts the consumer warps of both, each arriving on its own block's barrier and
// on the peer's. A column tile past N (odd tile counts) is computed on zero-filled codes and never stored.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>

#include "kernels/cuda/bulk_pipeline.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/sm90a/wna16_wgmma_tiles.h"
#include "kernels/cuda/stream_k_walk.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_k_order.h"
#include "kernels/cuda/wna16_wgmma.h"

namespace qlm::cuda {
namespace {

constexpr int kKS = kWna16WgmmaStageTiles;  // k-tiles per stage: two 64-wide swizzle atoms of x per token row
// Threads of a block with CW consumer warpgroups and PW producer warps: 1 or 2, or a whole warpgroup of 4 that
// hands its registers to the consumers (setmaxnreg: 40 for the producers, the rest to the consumers).
template <int PW, int CW>
constexpr int block_threads() {
  return 128 * CW + 32 * PW;
}
// Registers per consumer thread after the producer warpgroup's hand-over (a multiple of 8): from
// 65536 / block_threads at launch (168 at 384 threads, 128 at 512) to 232 with 2 consumer warpgroups,
// 152 with 3.
template <int CW>
constexpr int consumer_registers() {
  return CW == 2 ? 232 : 152;
}
constexpr int kMaxStages = 8;
// A lane's code word in the MMA's k order for x in its own k order (wna16_k_order.h says which bytes come from
// where): two shuffles within the quad and one byte permutation. Every lane of the warp must call it (the quad's
// lanes share their columns, so the words exchanged belong to the same column tile).
__device__ __forceinline__ uint32_t natural_k_word(uint32_t word, int lane) {
  const uint32_t low_rows = __shfl_sync(0xFFFFFFFFu, word, natural_k_source_lane(lane, 0));
  const uint32_t high_rows = __shfl_sync(0xFFFFFFFFu, word, natural_k_source_lane(lane, 1));
  return __byte_perm(low_rows, high_rows, natural_k_byte_selector(lane));
}

constexpr int kBlockStageBytes = kKS * 512;  // codes of one column block per stage
constexpr int kAlign = 1024;                 // 128-byte swizzle atoms: 8 rows x 128 bytes

// TN tokens x BPW column blocks of 64 per warpgroup (the accumulators: BPW * TN / 2 registers; a block
// of 9 warps gets at most 168 registers per thread, 112 at two blocks per multiprocessor).
template <int TN, int BPW, int CW>
struct WgShape {
  static constexpr int kBPW = BPW;
  static constexpr int kWN = CW * kBPW;                      // column blocks of 64 per tile
  static constexpr int kCols = kWN * 64;                     // output columns per tile
  static constexpr int kCodeBytes = kWN * kBlockStageBytes;  // codes per stage
  static constexpr int kXBytes = TN * kKS * 32;              // two [TN][64] halves of 16-bit elements
  static constexpr int kAcc = TN / 2;                        // f32 accumulators per thread per column block
};

// Shared-memory matrix descriptor of a K-major operand with the 128-byte swizzle: start address,
// stride 1024 bytes between 8-row groups (leading offset unused for this layout).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (static_cast<uint64_t>(1) << 62);
}
// The same from the address field (address / 16, 14 bits) alone: the high word is a constant, so a k-tile's
// descriptor is one 32-bit add from its stage's.
__device__ __forceinline__ uint64_t sw128_desc_of_field(uint32_t field) {
  return static_cast<uint64_t>(field) | (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Keeps the compiler from moving accesses of the accumulators across the asynchronous MMAs.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma m64nNk16, f32 accumulators (d += A B), A from registers, B K-major from shared memory; one
// function per shape and element type (TY: "bf16" or "f16"); N = 16 and 32 for the small token tiles, 256 for
// the 256-token tile. The N / 2 accumulators are the asm's first operands (%0 up, QLM_WGMMA_R<count> lists them
// in the instruction, QLM_WGMMA_D<count> binds them), then A's four registers and B's descriptor (A_REGS, DESC).
#define QLM_WGMMA_D8(B)                                                                                       \
  "+f"(d[B]), "+f"(d[B + 1]), "+f"(d[B + 2]), "+f"(d[B + 3]), "+f"(d[B + 4]), "+f"(d[B + 5]), "+f"(d[B + 6]), \
      "+f"(d[B + 7])
#define QLM_WGMMA_D16(B) QLM_WGMMA_D8(B), QLM_WGMMA_D8(B + 8)
#define QLM_WGMMA_D32(B) QLM_WGMMA_D16(B), QLM_WGMMA_D16(B + 16)
#define QLM_WGMMA_D64(B) QLM_WGMMA_D32(B), QLM_WGMMA_D32(B + 32)
#define QLM_WGMMA_D128(B) QLM_WGMMA_D64(B), QLM_WGMMA_D64(B + 64)
#define QLM_WGMMA_R8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define QLM_WGMMA_R16 QLM_WGMMA_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define QLM_WGMMA_R32 QLM_WGMMA_R16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define QLM_WGMMA_R64                                                                \
  QLM_WGMMA_R32                                                                      \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define QLM_WGMMA_R128                                                                           \
  QLM_WGMMA_R64                                                                                  \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"             \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"             \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define QLM_WGMMA_RS(NAME, N, TY, ACC, A_REGS, DESC)                                             \
  __device__ __forceinline__ void NAME(float(&d)[ACC], const uint32_t(&a)[4], uint64_t desc_b) { \
    asm volatile(                                                                                \
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                               \
        "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" QLM_WGMMA_R##ACC        \
        "}, "                                                                                    \
        "{" A_REGS "}, " DESC ", p, 1, 1, 0;\n}\n"                                               \
        : QLM_WGMMA_D##ACC(0)                                                                    \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                              \
  }
QLM_WGMMA_RS(wgmma_m64n16k16_bf16, 16, "bf16", 8, "%8, %9, %10, %11", "%12")
QLM_WGMMA_RS(wgmma_m64n16k16_f16, 16, "f16", 8, "%8, %9, %10, %11", "%12")
QLM_WGMMA_RS(wgmma_m64n32k16_bf16, 32, "bf16", 16, "%16, %17, %18, %19", "%20")
QLM_WGMMA_RS(wgmma_m64n32k16_f16, 32, "f16", 16, "%16, %17, %18, %19", "%20")
QLM_WGMMA_RS(wgmma_m64n64k16_bf16, 64, "bf16", 32, "%32, %33, %34, %35", "%36")
QLM_WGMMA_RS(wgmma_m64n64k16_f16, 64, "f16", 32, "%32, %33, %34, %35", "%36")
QLM_WGMMA_RS(wgmma_m64n128k16_bf16, 128, "bf16", 64, "%64, %65, %66, %67", "%68")
QLM_WGMMA_RS(wgmma_m64n128k16_f16, 128, "f16", 64, "%64, %65, %66, %67", "%68")
QLM_WGMMA_RS(wgmma_m64n256k16_bf16, 256, "bf16", 128, "%128, %129, %130, %131", "%132")
QLM_WGMMA_RS(wgmma_m64n256k16_f16, 256, "f16", 128, "%128, %129, %130, %131", "%132")
#undef QLM_WGMMA_RS
#undef QLM_WGMMA_D8
#undef QLM_WGMMA_D16
#undef QLM_WGMMA_D32
#undef QLM_WGMMA_D64
#undef QLM_WGMMA_D128
#undef QLM_WGMMA_R8
#undef QLM_WGMMA_R16
#undef QLM_WGMMA_R32
#undef QLM_WGMMA_R64
#undef QLM_WGMMA_R128

template <int TN, bool BF16>
__device__ __forceinline__ void wgmma_rs(float (&d)[TN / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (TN == 16 && BF16) wgmma_m64n16k16_bf16(d, a, desc_b);
  if constexpr (TN == 16 && !BF16) wgmma_m64n16k16_f16(d, a, desc_b);
  if constexpr (TN == 32 && BF16) wgmma_m64n32k16_bf16(d, a, desc_b);
  if constexpr (TN == 32 && !BF16) wgmma_m64n32k16_f16(d, a, desc_b);
  if constexpr (TN == 64 && BF16) wgmma_m64n64k16_bf16(d, a, desc_b);
  if constexpr (TN == 64 && !BF16) wgmma_m64n64k16_f16(d, a, desc_b);
  if constexpr (TN == 128 && BF16) wgmma_m64n128k16_bf16(d, a, desc_b);
  if constexpr (TN == 128 && !BF16) wgmma_m64n128k16_f16(d, a, desc_b);
  if constexpr (TN == 256 && BF16) wgmma_m64n256k16_bf16(d, a, desc_b);
  if constexpr (TN == 256 && !BF16) wgmma_m64n256k16_f16(d, a, desc_b);
}
template <int N>
__device__ __forceinline__ void fence_words(uint32_t (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// LATE (small token tiles, groups of whole stages): late scaling as in the stream kernel — the MMAs run on
// the raw codes (raw_tile4), one more MMA per k-tile with an all-ones A sums x, and after each stage
// (one scale group) drains its sums are scaled into `res` (add_group_share); 7 conversion instructions per
// 16x16 tile instead of 15, and no per-weight rounding to the act dtype.
// OG (one group per stage: tpg a multiple of the stage's k-tiles, or one group over all of K): the consumer
// loop without group bookkeeping — each column block's scale and zero split once per stage, the stage's x
// descriptor made once (the k-tiles' offsets are constants added to it), the code words of k-tile kt + 2
// loaded while kt's MMAs are issued (their shared-memory latency off the dequantization's path).
// NK (OG only): x in its own k order, the code words put in the MMA's k order by natural_k_word (wna16_wgmma.h).
template <bool BF16, int TN, int BPW, int PER_SM, int PW, int CW, bool ZP, bool LATE, bool OG, bool NK = false>
__global__ void __launch_bounds__(block_threads<PW, CW>(), PER_SM)
    wgmma_kernel(const __grid_constant__ CUtensorMap xmap, const Wna16FastArgs w, int M, int stages, int stage_bytes,
                 int par_bytes, int64_t max_segments, int pair, int producers, float* __restrict__ ws,
                 unsigned* __restrict__ counters, bool acq_rel_fixup, bool staged_y, bool head_first,
                 const float* __restrict__ bias, uint16_t* __restrict__ y) {
  static_assert(OG || !NK, "x in its own k order: the one-group loop only");
  using namespace bulk;
  using S = WgShape<TN, BPW, CW>;
  static_assert(!(LATE && OG), "late scaling has its own one-group loop");
  constexpr int kConsumerWarps = 4 * CW, kConsumers = 128 * CW;
  constexpr int kXBytes = S::kXBytes, kAcc = S::kAcc, kBPW = S::kBPW, kWN = S::kWN, kCols = S::kCols;
  constexpr int kCodeBytes = S::kCodeBytes;
  constexpr int kXBox = TN * 128;  // one 64-k half of the token tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxStages];
  __shared__ bool last_segment;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t n_blocks = w.n_blocks, k_tiles = w.k_tiles;
  const int tpg = static_cast<int>(w.tiles_per_group);
  const int64_t per_tile = (k_tiles + kKS - 1) / kKS;
  const int64_t n_tiles = (n_blocks + kWN - 1) / kWN, m_tiles = (M + TN - 1) / TN;
  // Work units: (m-tile, group of `pair` column tiles) x k-stages, taken by the G clusters (blocks when pair = 1);
  // this block takes column tile group * pair + rank of each.
  const uint32_t rank = pair > 1 ? cluster_rank() : 0u;
  const int64_t n_groups = (n_tiles + pair - 1) / pair;
  const int64_t T = m_tiles * n_groups * per_tile, G = gridDim.x / pair, unit = blockIdx.x / pair;
  const int64_t q_begin = unit * T / G, q_end = (unit + 1) * T / G;
  // The block walks [q_first, q_end), then [q_begin, q_first): its split tiles' segments first where head_first
  // (stream_k_walk.h), producer and consumers alike.
  const int64_t q_first = stream_k_walk_first(q_begin, q_end, per_tile, head_first);
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t sbase = (raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  unsigned char* const smem = smem_raw + (sbase - raw);
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kMaxStages]);

  // Programmatic dependent launch (a no-op without it): the next kernel may take this SM once this block has left
  // it; it waits for this grid before touching its output.
  allow_dependents();
  // Zeros in every stage: the k-tiles past K of a last stage and the column blocks past N read slots
  // no copy filled; their products must stay finite (they are multiplied by zero x or never stored).
  constexpr int kThreads = block_threads<PW, CW>();
  for (int i = tid; i < stages * stage_bytes / 16; i += kThreads)
    reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // before the copies overwrite them
  if (tid == 0) {
    for (int i = 0; i < stages; ++i) {
      mbar_init(full0 + 8 * i, 1);
      mbar_init(empty0 + 8 * i, kConsumerWarps * pair);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (pair > 1) cluster_sync();  // the peer's barriers and zeroed slots before any copy or arrival reaches them

  if (warp >= kConsumerWarps) {  // producer
    if constexpr (PW == 4) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    // Warps [kConsumerWarps, kConsumerWarps + parts) issue the stages of the ring slots they own; the rest of a
    // warpgroup only gave its registers away.
    const int part = warp - kConsumerWarps, parts = producers < PW ? producers : PW;
    if (part >= parts) return;
    if (lane == 0) prefetch_tensor_map(&xmap);
    const uint64_t policy = evict_first_policy();
    // The copies of the stage at cursor c into ring slot `slot`: the weights (codes, scales, zeros, with the
    // stage's expect_tx, which counts the token tile too) and / or the token tile.
    const auto copy_stage = [&](const StageCursor& c, int slot, bool weights, bool x_tile) {
      const int64_t mi = c.tile / n_groups, nt = c.tile % n_groups * pair + rank;
      const int64_t k0 = c.j * kKS, nb0 = nt * kWN, m0 = mi * TN;
      const int nvalid = static_cast<int>(n_blocks - nb0 < kWN ? (n_blocks > nb0 ? n_blocks - nb0 : 0) : kWN);
      const uint32_t base = sbase + slot * stage_bytes, bar = full0 + 8 * slot;
      if (weights) {
        const int nkt = static_cast<int>(k_tiles - k0 < kKS ? k_tiles - k0 : kKS);
        const int ng = c.groups(nkt, tpg);
        const uint32_t code_bytes = nkt * 512;
        const uint32_t bytes = 2 * kXBox + nvalid * code_bytes + (ZP ? 2 : 1) * ng * nvalid * 128;
        if (lane == 0) mbar_expect_tx(bar, bytes);
        __syncwarp();
        if (lane < nvalid) {
          const uint32_t* src = static_cast<const uint32_t*>(w.codes) + ((nb0 + lane) * k_tiles + k0) * 128;
          const uint32_t dst = base + kXBytes + lane * kBlockStageBytes;
          if (m_tiles == 1)
            bulk_load_hint(dst, src, code_bytes, bar, policy);
          else
            bulk_load(dst, src, code_bytes, bar);
        }
        if (nvalid > 0)
          load_group_params<ZP, kWN>(lane, ng, c.g_lo, n_blocks, nb0, nvalid, w.scales, w.zeros,
                                     base + kXBytes + kCodeBytes, par_bytes, bar);
      }
      // The token tile, 64 k per box, in the 128-byte swizzle; rows >= M and k >= K arrive as zeros (a box
      // wholly past K too: the consumers multiply every k-tile of a stage).
      // In pairs each block copies box `rank` into both blocks (the expect_tx above counts both boxes).
      if (x_tile && lane == 0) {
        if (pair > 1)
          tensor_load_2d_multicast(base + rank * kXBox, &xmap, static_cast<int>((k0 + 4 * rank) * 16),
                                   static_cast<int>(m0), bar, uint16_t{3});
        else
          for (int b = 0; b < 2; ++b)
            tensor_load_2d(base + b * kXBox, &xmap, static_cast<int>((k0 + 4 * b) * 16), static_cast<int>(m0), bar);
      }
    };
    // The first ring's weights before the wait for the previous kernel, which writes x; their token tiles after.
    produce_stages<true, true>(q_begin, q_end, per_tile, kKS, tpg, stages, empty0, copy_stage, part, parts, q_first);
    return;
  }
  // The consumers write y, the partial sums and the counters, which the previous kernel may still use.
  wait_for_predecessor();

  if constexpr (PW == 4)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_registers<CW>()) : "memory");
  // Consumers: warpgroup wg owns column blocks kBPW wg .. kBPW wg + kBPW - 1; warp jw of it rows
  // 16jw..16jw+15 of each. Two sets of A registers: k-tile kt + 1 is dequantized while kt's MMAs run.
  const int wg = warp / 4, jw = warp % 4;
  const int g = lane >> 2, t4 = lane & 3;
  // The 16-column tile of each column block whose rows this thread's A fragments and accumulators hold (rows
  // g, g + 8 of the warp's 16 MMA rows). General loop: tile jw, word jw of each lane's 16 code bytes (a 4-way
  // bank conflict). OG: tile (jw + g / 2) mod 4 — a permutation of the block's 64 columns over the MMA's 64
  // rows (for each row r of a warp, the four warps take the four tiles) under which the 32 lanes of a warp
  // read 32 different banks; the stores map the rows back through `column`.
  const int jt = OG ? (jw + (g >> 1)) & 3 : jw;
  const uint32_t kOnes[4] = {ones_pair<BF16>(), ones_pair<BF16>(), ones_pair<BF16>(), ones_pair<BF16>()};
  int slot = 0;
  uint32_t phase = 0;
  // The walk's current piece: [q_first, q_end), then [q_begin, q_first) (recomputed there: fewer values live in the
  // loop, whose registers are all taken).
  int64_t q = q_first, q_stop = q_end;
  bool second_piece = false;
  // A stage's slot released: to this block's producer and, in pairs, the peer's (its copies land here too).
  const auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(empty0 + 8 * s);
      if (pair > 1) mbar_arrive_peer(empty0 + 8 * s, rank ^ 1u);
    }
  };
  while (q < q_stop) {
    const int64_t unit_tile = q / per_tile, j0 = q % per_tile;
    const int64_t j1 = min(per_tile, j0 + (q_stop - q));
    const int64_t mi = unit_tile / n_groups, nt = unit_tile % n_groups * pair + rank;
    const int64_t tile = unit_tile * pair + rank;  // this block's tile: its counter and partial slots
    const int64_t nb0 = nt * kWN, m0 = mi * TN;
    // staged_y: the ring slot of the segment's last stage, kept for the epilogue (store_y_staged).
    const int held = static_cast<int>((slot + (j1 - j0 - 1)) % stages);
    float acc[kBPW][kAcc];  // LATE: the current stage's sums on raw codes
    constexpr int kLateAcc = LATE ? kAcc : 1;
    float res[LATE ? kBPW : 1][kLateAcc], xsum[kLateAcc];  // LATE: the scaled result; the stage's x sums
#pragma unroll
    for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[cb][i] = 0.0f;
    if constexpr (LATE) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) {
        xsum[i] = 0.0f;
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) res[cb][i] = 0.0f;
      }
    }

    if constexpr (!OG) {
      // Stage state: its shared memory, the group slot of the next k-tile to dequantize and that k-tile's
      // row in its group (advanced by dequant, in k order).
      int rl = static_cast<int>(j0 * kKS % tpg);
      const unsigned char* st = smem + slot * stage_bytes;
      int gk = 0, rk = rl;
      uint32_t s0[kBPW], s1[kBPW], z0[kBPW], z1[kBPW];
      uint32_t a[2][kBPW][4];
      // Dequantizes k-tile kt of the stage at st into out; scales and zeros reloaded per group.
      auto dequant = [&](int kt, uint32_t(&out)[kBPW][4]) {
        const uint32_t* sc = reinterpret_cast<const uint32_t*>(st + kXBytes);
        const uint32_t* ss = reinterpret_cast<const uint32_t*>(st + kXBytes + kCodeBytes);
        const uint32_t* sz = reinterpret_cast<const uint32_t*>(st + kXBytes + kCodeBytes + par_bytes);
        if constexpr (LATE) {
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb)
            raw_tile4<BF16>(sc[(((kBPW * wg + cb) * kKS + kt) * 32 + lane) * 4 + jw], out[cb]);
          return;
        }
        const bool new_group = kt == 0 || rk == 0;
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) {
          const int blk = kBPW * wg + cb;
          if (new_group) {
            const int pi = ((gk * kWN + blk) * 8 + g) * 4 + jw;  // word jw of lane g's 16 bytes
            const uint32_t sw = ss[pi];
            split_row_pair(sw, s0[cb], s1[cb]);
            uint32_t zw = w.zero_const;
            if constexpr (ZP) zw = sz[pi];
            split_row_pair(zw, z0[cb], z1[cb]);
          }
          dequant_tile<4, BF16>(sc[((blk * kKS + kt) * 32 + lane) * 4 + jw], 0u, s0[cb], s1[cb], z0[cb], z1[cb],
                                out[cb]);
        }
        if (++rk == tpg) rk = 0, ++gk;
      };
      mbar_wait(full0 + 8 * slot, phase);
      dequant(0, a[0]);
      for (int64_t jj = j0; jj < j1; ++jj) {
        const uint32_t xs = sbase + slot * stage_bytes;
        // No branch around the MMAs (ptxas serializes wgmma in divergent code): every k-tile of the stage
        // and every column block is multiplied. k-tiles past K meet zero x (the tensor map's fill), blocks
        // past the last column are never stored; both read finite stale or zeroed codes and scales.
#pragma unroll
        for (int kt = 0; kt < kKS; ++kt) {
          const uint64_t desc = sw128_desc(xs + (kt / 4) * kXBox + (kt % 4) * 32);
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
          if constexpr (LATE) fence_regs(xsum);
          wgmma_fence();
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) wgmma_rs<TN, BF16>(acc[cb], a[kt % 2][cb], desc);
          if constexpr (LATE) wgmma_rs<TN, BF16>(xsum, kOnes, desc);
          wgmma_commit();
          wgmma_wait<1>();  // the previous k-tile's MMAs are done: its A registers are free
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_words(a[(kt + 1) % 2][cb]);
          if (kt + 1 < kKS) dequant(kt + 1, a[(kt + 1) % 2]);
        }
        // The next stage's first k-tile is dequantized while this stage's last MMAs run; then this
        // stage drains (no MMA in flight across iterations: ptxas would serialize them) and is released.
        const int next = slot + 1 == stages ? 0 : slot + 1;
        const uint32_t next_phase = next == 0 ? phase ^ 1u : phase;
        rl = (rl + kKS) % tpg;
        if (jj + 1 < j1) {
          mbar_wait(full0 + 8 * next, next_phase);
          st = smem + next * stage_bytes, gk = 0, rk = rl;
          dequant(0, a[0]);
        }
        wgmma_wait<0>();
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
        if constexpr (LATE) {
          // The stage is one scale group: res += s * (acc - (base + z) * sum x), rows g (e < 2) and g + 8.
          fence_regs(xsum);
          const unsigned char* sp = smem + slot * stage_bytes;
          const uint32_t* ss = reinterpret_cast<const uint32_t*>(sp + kXBytes + kCodeBytes);
          const uint32_t* sz = reinterpret_cast<const uint32_t*>(sp + kXBytes + kCodeBytes + par_bytes);
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) {
            const int pi = ((kBPW * wg + cb) * 8 + g) * 4 + jw;
            const uint32_t sw = ss[pi], zw = ZP ? sz[pi] : w.zero_const;
            const float sr[2] = {act_lo<BF16>(sw), act_hi<BF16>(sw)}, zr[2] = {act_lo<BF16>(zw), act_hi<BF16>(zw)};
#pragma unroll
            for (int i = 0; i < kAcc; ++i) {
              const int r = (i & 3) >> 1;
              res[cb][i] = add_group_share(res[cb][i], sr[r], zr[r], acc[cb][i], xsum[i]);
              acc[cb][i] = 0.0f;
            }
          }
#pragma unroll
          for (int i = 0; i < kAcc; ++i) xsum[i] = 0.0f;
        }
        if (!staged_y || jj + 1 < j1) release(slot);  // staged_y: the segment's last slot is released after y
        slot = next, phase = next_phase;
      }
    } else {
      // One scale group per stage (OG): per thread, word offsets of its code words (+ (cb * kKS + kt) * 128)
      // and of its scale / zero words (+ cb * 32) from a stage's code and parameter regions.
      const int code_w0 = ((kBPW * wg * kKS) * 32 + lane) * 4 + jt;
      const int par_w0 = ((kBPW * wg) * 8 + g) * 4 + jt;
      uint32_t s0[kBPW], s1[kBPW], z0[kBPW], z1[kBPW];
      uint32_t cw[2][kBPW];  // code words of the k-tiles of parity 0 / 1 next to dequantize
      uint32_t a[2][kBPW][4];
      const unsigned char* st = smem + slot * stage_bytes;
      const auto stage_params = [&] {
        const uint32_t* ss = reinterpret_cast<const uint32_t*>(st + kXBytes + kCodeBytes) + par_w0;
        const uint32_t* sz = reinterpret_cast<const uint32_t*>(st + kXBytes + kCodeBytes + par_bytes) + par_w0;
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) {
          const uint32_t sw = ss[cb * 32];
          uint32_t zw = w.zero_const;
          if constexpr (ZP) zw = sz[cb * 32];
          split_row_pair(sw, s0[cb], s1[cb]);
          split_row_pair(zw, z0[cb], z1[cb]);
        }
      };
      const auto load_codes = [&](int kt, uint32_t(&out)[kBPW]) {
        const uint32_t* sc = reinterpret_cast<const uint32_t*>(st + kXBytes) + code_w0;
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) out[cb] = sc[(cb * kKS + kt) * 128];
      };
      // NK: the words go to the MMA's k order (natural_k_word) as they arrive where a warp has one column block
      // (kEarlyK: 1-2 % faster there), as they are dequantized where it has more (early exchanges, and two shuffles per
      // two words, measured 1-3 % slower on those tiles: docs/w4a16-kernel-notes.md, v7o).
      constexpr bool kEarlyK = NK && kBPW == 1;
      const auto exchange_early = [&](uint32_t(&words)[kBPW]) {
        if constexpr (kEarlyK) words[0] = natural_k_word(words[0], lane);
      };
      const auto convert = [&](const uint32_t(&words)[kBPW], uint32_t(&out)[kBPW][4]) {
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb)
          dequant_tile<4, BF16>(NK && !kEarlyK ? natural_k_word(words[cb], lane) : words[cb], 0u, s0[cb], s1[cb],
                                z0[cb], z1[cb], out[cb]);
      };
      // A stage's start: its parameters, the code words of its k-tiles 0 and 1, k-tile 0 dequantized.
      const auto begin_stage = [&] {
        stage_params();
        load_codes(0, cw[0]);
        load_codes(1, cw[1]);
        exchange_early(cw[0]);
        exchange_early(cw[1]);
        convert(cw[0], a[0]);
      };
      mbar_wait(full0 + 8 * slot, phase);
      begin_stage();
      for (int64_t jj = j0; jj < j1; ++jj) {
        // The descriptor's address field (bits 0-13, address / 16) never carries: shared memory ends below
        // 2^18 bytes, so each k-tile's offset is added to the stage's descriptor.
        const uint32_t field0 = ((sbase + slot * stage_bytes) & 0x3FFFF) >> 4;
#pragma unroll
        for (int kt = 0; kt < kKS; ++kt) {
          // k-tile kt's words were dequantized in the previous step: its buffer takes k-tile kt + 2.
          if (kt + 2 < kKS) load_codes(kt + 2, cw[kt % 2]);
          const uint64_t desc = sw128_desc_of_field(field0 + (((kt / 4) * kXBox + (kt % 4) * 32) >> 4));
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
          wgmma_fence();
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) wgmma_rs<TN, BF16>(acc[cb], a[kt % 2][cb], desc);
          wgmma_commit();
          // kEarlyK: k-tile kt + 2's words exchanged while the MMAs run, off the dequantization's path.
          if (kt + 2 < kKS) exchange_early(cw[kt % 2]);
          wgmma_wait<1>();  // the previous k-tile's MMAs are done: its A registers are free
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_words(a[(kt + 1) % 2][cb]);
          if (kt + 1 < kKS) convert(cw[(kt + 1) % 2], a[(kt + 1) % 2]);
        }
        // As in the general loop: the next stage's first k-tile while this stage's last MMAs run, then drain
        // and release.
        const int next = slot + 1 == stages ? 0 : slot + 1;
        const uint32_t next_phase = next == 0 ? phase ^ 1u : phase;
        if (jj + 1 < j1) {
          mbar_wait(full0 + 8 * next, next_phase);
          st = smem + next * stage_bytes;
          begin_stage();
        }
        wgmma_wait<0>();
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
        if (!staged_y || jj + 1 < j1) release(slot);  // staged_y: the segment's last slot is released after y
        slot = next, phase = next_phase;
      }
    }

    // Accumulator (cb, i, e): column (kBPW wg + cb) * 64 + 16 jt + g + 8 (e / 2), token 8 i + 2 t4 + e % 2.
    const int64_t n0 = nb0 * 64;
    auto column = [&](int cb, int e) { return (kBPW * wg + cb) * 64 + 16 * jt + g + 8 * (e >> 1); };
    auto token = [&](int i, int e) { return 8 * i + 2 * t4 + (e & 1); };
    auto result = [&](int cb, int k) -> float& {
      if constexpr (LATE) return res[cb][k];
      return acc[cb][k];
    };
    // Where accumulator (cb, i, e) lies in a split-K partial slot. General loop: the tile's [token][column]
    // order (a warp's store: 4 tokens x 8 consecutive columns, whole 32-byte sectors). OG: its column
    // permutation leaves 2 consecutive columns per 16, so the slot keeps the accumulators' own order (thread
    // fastest: 128-byte rows); only the same thread layout reads it back.
    static_assert(kBPW * kAcc * kConsumers == TN * kCols, "a partial slot holds every accumulator once");
    auto slot_at = [&](int cb, int i, int e) -> int64_t {
      if constexpr (OG) return ((cb * (kAcc / 4) + i) * 4 + e) * kConsumers + tid;
      return token(i, e) * kCols + column(cb, e);
    };
    // y from the tile's results (in the accumulators: this segment's own, or every segment's once summed).
    const auto store_y = [&] {
#pragma unroll
      for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t n = n0 + column(cb, e), m = m0 + token(i, e);
            if (n < w.N && m < M) {
              float v = result(cb, 4 * i + e);
              if (bias) v += bias[n];
              y[m * w.N + n] = to_bits(v, BF16);
            }
          }
    };
    // staged_y (y 16-byte aligned, N a multiple of 8): y through the held ring slot instead, in whole 16-byte
    // pieces. A thread's accumulators hold one column at two adjacent tokens (rows g, g + 8 of its MMA rows); after
    // one exchange with lane ^ 4 (the next column, same 16-column tile) each thread has two adjacent columns at one
    // token, written as one word into rows of kRowWords words (16 bytes of padding: a warp's 32 words land in 32
    // different banks in either loop's column order), then every consumer thread copies 16-byte pieces of whole
    // rows to y (the direct stores write 2 bytes at a time, 4 tokens x 4-8 sectors per warp instruction). The same
    // values and rounding as store_y; passes of whole 8-token groups where the tile does not fit the slot at once.
    const auto store_y_staged = [&] {
      constexpr int kRowWords = kCols / 2 + 4, kChunks = kCols / 8, kGroups = TN / 8;
      constexpr int kFit = (kXBytes + kCodeBytes) / (8 * kRowWords * 4);
      static_assert(kFit >= 1, "a ring slot holds 8 rows of the tile");
      constexpr int kPassGroups = kFit < kGroups ? kFit : kGroups;
      constexpr int kPasses = (kGroups + kPassGroups - 1) / kPassGroups;
      uint32_t* const rows = reinterpret_cast<uint32_t*>(smem + held * stage_bytes);
      const uint32_t odd = g & 1;
      // The slot's last readers were the wgmmas of every consumer warpgroup (each waited only for its own: all of
      // them must be past their wait before any thread overwrites the x tile they read), its writers the copies.
      consumer_sync<kConsumers>();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const int i0 = pass * kPassGroups;
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
          for (int i = 0; i < kAcc / 4; ++i) {
            if (i < i0 || i >= i0 + kPassGroups) continue;
            uint32_t h[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int64_t n = n0 + column(cb, e);
              float v = result(cb, 4 * i + e);
              if (bias && n < w.N) v += bias[n];
              h[e] = to_bits(v, BF16);
            }
            // Even g keeps its token 8i + 2t4 and takes the next column's; odd g keeps token + 1 and takes the
            // previous column's.
            const uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, odd ? h[0] | h[2] << 16 : h[1] | h[3] << 16, 4);
            const uint32_t w0 = odd ? (got & 0xFFFFu) | h[1] << 16 : h[0] | got << 16;
            const uint32_t w1 = odd ? (got >> 16) | h[3] << 16 : h[2] | (got & 0xFFFF0000u);
            const int r = 8 * (i - i0) + 2 * t4 + static_cast<int>(odd);
            const int cp = (column(cb, 0) - static_cast<int>(odd)) / 2;
            rows[r * kRowWords + cp] = w0;
            rows[r * kRowWords + cp + 4] = w1;  // 8 columns on
          }
        consumer_sync<kConsumers>();
        const int pass_rows = 8 * (kGroups - i0 < kPassGroups ? kGroups - i0 : kPassGroups);
        for (int idx = tid; idx < pass_rows * kChunks; idx += kConsumers) {
          const int r = idx / kChunks, ch = idx - r * kChunks;
          const int64_t m = m0 + 8 * i0 + r, n = n0 + 8 * ch;
          if (m < M && n < w.N)
            *reinterpret_cast<uint4*>(y + m * w.N + n) = *reinterpret_cast<const uint4*>(rows + r * kRowWords + 4 * ch);
        }
        consumer_sync<kConsumers>();  // the rows read before the next pass (or the next copies) overwrite them
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // before the slot's next copies
    };
    const auto write_y = [&] {
      if (staged_y)
        store_y_staged();
      else
        store_y();
    };
    if (j0 == 0 && j1 == per_tile) {
      write_y();
    } else {
      const int64_t tile_q0 = unit_tile * per_tile;
      const int64_t first = owner_of(tile_q0, T, G);
      const int64_t segments = owner_of(tile_q0 + per_tile - 1, T, G) - first + 1;
      constexpr int kTileFloats = TN * kCols;
      float* tile_ws = ws + tile * max_segments * kTileFloats;
      float* mine = tile_ws + (unit - first) * kTileFloats;
#pragma unroll
      for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) __stcg(mine + slot_at(cb, i, e), result(cb, 4 * i + e));
      count_tile_segment<kConsumers>(counters, tile, segments, acq_rel_fixup, last_segment, tid);
      if (last_segment) {
        if (!acq_rel_fixup) __threadfence();
        // The slots summed in slot order (deterministic: the same sums whichever segment ends last), into the
        // accumulators (this segment's values are in its slot too). Segments outside, accumulators inside: each
        // slot's loads are independent and in flight together (one L2 round trip per slot; with the slots inside,
        // every accumulator waited for its own chain of loads: a third of the kernel's time at M = 64).
        for (int64_t sgm = 0; sgm < segments; ++sgm) {
          const float* part = tile_ws + sgm * kTileFloats;
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
            for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const float p = __ldcg(part + slot_at(cb, i, e));
                float& r = result(cb, 4 * i + e);
                r = sgm == 0 ? p : r + p;
              }
        }
        write_y();
        if (tid == 0) counters[tile] = 0u;
      }
    }
    if (staged_y) release(held);
    consumer_sync<kConsumers>();  // last_segment is reused by the next segment
    q += j1 - j0;
    if (q == q_stop && !second_piece) {
      second_piece = true;
      const int64_t begin = unit * T / G;
      q_stop = stream_k_walk_first(begin, q, per_tile, head_first);
      q = begin;
    }
  }
  // In pairs: the peer's consumers may still arrive on this block's empty barriers.
  if (pair > 1) cluster_sync();
}

// Dynamic shared memory one block may use: the opt-in limit, or the multiprocessor's share at
// PER_SM blocks (less the per-block reservation, static barriers and flag).
template <bool BF16, int TN, int BPW, int PER_SM, int PW, int CW, bool ZP, bool LATE, bool OG>
int smem_limit() {
  static const int limit = [] {
    int dev = 0, optin = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
      return 0;
    const int usable = std::min(optin, per_sm / PER_SM - 1024) - 1024;
    if (cudaFuncSetAttribute(wgmma_kernel<BF16, TN, BPW, PER_SM, PW, CW, ZP, LATE, OG>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, usable) != cudaSuccess)
      return 0;
    if constexpr (OG) {  // its twin with x in its own k order takes the same plan
      if (cudaFuncSetAttribute(wgmma_kernel<BF16, TN, BPW, PER_SM, PW, CW, ZP, LATE, OG, true>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, usable) != cudaSuccess)
        return 0;
    }
    return usable;
  }();
  return limit;
}

struct Plan {
  int stages = 0, stage_bytes = 0, par_bytes = 0;
  size_t smem = 0;
};

template <bool BF16, int TN, int BPW, int PER_SM, int PW, int CW, bool ZP, bool LATE = false, bool OG = false>
Plan plan_of(const Wna16FastArgs& w) {
  using S = WgShape<TN, BPW, CW>;
  const int64_t tpg = std::max<int64_t>(1, w.tiles_per_group);
  const int gslots = static_cast<int>(std::min<int64_t>(kKS, (kKS - 1) / tpg + 2));
  Plan p;
  p.par_bytes = gslots * S::kWN * 128;
  const int raw = S::kXBytes + S::kCodeBytes + (ZP ? 2 : 1) * p.par_bytes;
  p.stage_bytes = (raw + kAlign - 1) / kAlign * kAlign;
  const int limit = smem_limit<BF16, TN, BPW, PER_SM, PW, CW, ZP, LATE, OG>();
  p.stages =
      std::min<int>(std::min(kMaxStages, wna16_wgmma_max_stages(TN, S::kCols)), (limit - kAlign) / p.stage_bytes);
  if (p.stages < 2) p.stages = 0;
  p.smem = static_cast<size_t>(p.stages) * p.stage_bytes + kAlign;  // + room to align the base
  return p;
}

template <int TN, int BPW, int PER_SM, int PW, int CW, typename F>
auto by_dtype(bool bf16, bool zp, F& f) {
  if (bf16)
    return zp ? f.template operator()<true, TN, BPW, PER_SM, PW, CW, true>()
              : f.template operator()<true, TN, BPW, PER_SM, PW, CW, false>();
  return zp ? f.template operator()<false, TN, BPW, PER_SM, PW, CW, true>()
            : f.template operator()<false, TN, BPW, PER_SM, PW, CW, false>();
}

template <int I, typename F>
auto by_tile(bool bf16, bool zp, F& f) {
  constexpr Wna16WgmmaTile t = kWna16WgmmaTiles[I];
  return by_dtype<t.tokens, t.blocks_per_wg, t.per_sm, t.producer_warps, t.consumer_warpgroups>(bf16, zp, f);
}

// Runs f.template operator()<BF16, TN, BPW, PER_SM, PW, CW, ZP>() for tile configuration `tile`
// (kWna16WgmmaTiles), or returns unmatched.
struct UsableF {
  const Wna16FastArgs& w;
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z>
  bool operator()() const {
    return plan_of<H, TN, BPW, PER_SM, PW, CW, Z>(w).stages >= 2;
  }
};

// The tensor map of x [M][ldx] 16-bit (k_tiles * 16 columns used, zeros past ldx): boxes of 64 k x TN tokens,
// 128-byte swizzle, zeros outside.
bool x_tensor_map(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int tn, CUtensorMap* map) {
  return encode_u16_tensor_map(map, x, static_cast<uint64_t>(w.k_tiles * 16), static_cast<uint64_t>(M), ldx, 64,
                               static_cast<uint32_t>(tn), CU_TENSOR_MAP_SWIZZLE_128B);
}

struct LaunchF {
  const WgmmaCall& c;
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z>
  cudaError_t operator()() const {
    if constexpr (TN <= 32) {
      if (wna16_wgmma_late(*c.w, TN)) return run<H, TN, BPW, PER_SM, PW, CW, Z, true, false>();
    }
    // Every tile has a one-group-per-stage kernel (OG; t7 and t8 since session 21).
    if (wna16_wgmma_one_group(*c.w)) return run<H, TN, BPW, PER_SM, PW, CW, Z, false, true>();
    return run<H, TN, BPW, PER_SM, PW, CW, Z, false, false>();
  }
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z, bool LATE, bool OG>
  cudaError_t run() const {
    if constexpr (OG) {
      if (c.natural_k) return launch<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG, true>();
    } else {
      if (c.natural_k) return cudaErrorInvalidValue;  // x in its own k order: the one-group loop only
    }
    return launch<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG, false>();
  }
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z, bool LATE, bool OG, bool NK>
  cudaError_t launch() const {
    const Wna16FastArgs& w = *c.w;
    const Plan p = plan_of<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG>(w);
    CUtensorMap xmap;
    if (p.stages == 0 || !x_tensor_map(w, c.x, c.ldx, c.M, TN, &xmap)) return cudaErrorInvalidValue;
    const cudaError_t e = launch_pdl_cluster_if(
        c.pdl, static_cast<unsigned>(c.pair), wgmma_kernel<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG, NK>, dim3(c.blocks),
        dim3(block_threads<PW, CW>()), p.smem, c.stream, xmap, w, static_cast<int>(c.M), p.stages, p.stage_bytes,
        p.par_bytes, wna16_wgmma_max_segments(w, c.M, c.tile, c.blocks, c.pair), c.pair, c.producers, c.ws, c.counters,
        c.acq_rel_fixup, c.staged_y, c.head_first, c.bias, static_cast<uint16_t*>(c.y));
    return e != cudaSuccess ? e : cudaGetLastError();
  }
};

// Clusters of `pair` blocks the kernel a call with these weights runs (the one-group loop where it applies) can keep
// resident at once (cudaOccupancyMaxActiveClusters, cached per kernel and pair size: the plan's shared memory differs
// between layers only in how many stages fill the block's share, which is sized for per_sm blocks per SM, so the
// residency does not).
struct MaxClustersF {
  const Wna16FastArgs& w;
  int pair;
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z>
  int operator()() const {
    if (wna16_wgmma_one_group(w)) return of<H, TN, BPW, PER_SM, PW, CW, Z, false, true>();
    return of<H, TN, BPW, PER_SM, PW, CW, Z, false, false>();
  }
  template <bool H, int TN, int BPW, int PER_SM, int PW, int CW, bool Z, bool LATE, bool OG>
  int of() const {
    static std::atomic<int> known[2] = {-1, -1};  // by pair size 1, 2
    std::atomic<int>& k = known[pair == 2 ? 1 : 0];
    if (const int v = k.load(); v >= 0) return v;
    const Plan p = plan_of<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG>(w);
    cudaLaunchAttribute attr = cluster_attribute(static_cast<unsigned>(pair));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(pair);
    cfg.blockDim = dim3(block_threads<PW, CW>());
    cfg.dynamicSmemBytes = p.smem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int n = 0;
    if (p.stages == 0 || cudaOccupancyMaxActiveClusters(&n, wgmma_kernel<H, TN, BPW, PER_SM, PW, CW, Z, LATE, OG>,
                                                        &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    k.store(n);
    return n;
  }
};

}  // namespace
}  // namespace qlm::cuda

// Defines the entry points of tile configuration I (declared in wna16_wgmma_tiles.h) in namespace qlm::cuda.
#define QLM_WGMMA_DEFINE_TILE(I)                                       \
  bool wgmma_tile##I##_usable(const Wna16FastArgs& w) {                \
    UsableF f{w};                                                      \
    return by_tile<I>(w.bf16, w.zeros != nullptr, f);                  \
  }                                                                    \
  int wgmma_tile##I##_max_clusters(const Wna16FastArgs& w, int pair) { \
    MaxClustersF f{w, pair};                                           \
    return by_tile<I>(w.bf16, w.zeros != nullptr, f);                  \
  }                                                                    \
  cudaError_t wgmma_tile##I##_launch(const WgmmaCall& c) {             \
    LaunchF f{c};                                                      \
    return by_tile<I>(c.w->bf16, c.w->zeros != nullptr, f);            \
  }
