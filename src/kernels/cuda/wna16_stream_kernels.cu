// The stream GEMM of `cuda_wna16_fast` for few tokens on sm_90 (layout: wna16_fast_layout.h):
// y^T = W^T x^T with mma.sync m16n8k16 like the tiled kernel, but fed by a producer warp.
//
// Why: at M <= 16 the tiled kernel spends ~150 instructions per warp and k-tile, half of them on
// cp.async address and predicate bookkeeping, and is issue-bound at ~40 % of the weight floor. Here
// one producer warp moves each stage with a handful of `cp.async.bulk` copies (the codes of one
// column block are contiguous along k, so one copy per column block, one per token row of x and one
// per scale / zero group), completing on an mbarrier; the consumer warps only load fragments from
// shared memory, convert and multiply.
//
// 4-bit codes at one or two m-tiles (M <= 16) scale late (wna16_fast_device.cuh: MMAs on the raw codes, the group's
// scale applied to f32 sums) and 12 consumer warps in 3 groups take the stages in turn, a warp a whole column
// block of its group's stage; with one scale group per stage a warp copies the stage's fragments to registers
// and releases the slot before its math (docs/w4a16-kernel-notes.md, v5e-v5i). Other widths and m-tiles: every
// consumer warp takes a k-slice of every stage and scales each weight before its MMA.
//
// x, from two m-tiles on: with a tensor map (the default where the driver and x's alignment allow;
// QLM_W4FAST_STREAM_XMAP=0 off) one 2-D bulk-tensor copy per stage brings every token row of the stage, already
// at the padded row stride; otherwise one cp.async.bulk per token row (22 copies per stage at 16 tokens
// instead of 7).
//
// Programmatic dependent launch: the producer requests the first ring's weights before waiting for the
// previous kernel in the stream (griddepcontrol.wait), x after; every consumer write comes after a stage
// whose x arrived, so after that wait.
//
// Work split (stream-K): the k-stages of all column tiles form one sequence, tile after tile; block b
// of the persistent grid takes stages [b*T/G, (b+1)*T/G) of it, so every block streams the same
// number of bytes. A block's range cuts tiles into segments; a tile covered by one segment is written
// directly, otherwise every segment writes f32 partials into its slot and the last to arrive sums the
// slots in slot order (deterministic) and writes y. The host sizes the grid so that shares start and end on
// tile boundaries where a grid close to one block per SM allows it (wna16_aligned_grid, wna16_fast_paths.h).
//
// Pipeline invariants: full[s] completes when the producer's expect_tx arrival and all bytes of
// stage s have landed; empty[s] when every consumer warp reading slot s (kStageWarps) has arrived. Stage i
// of the block uses slot i % stages and phase (i / stages) & 1 on both barriers (counted, not divided), the
// same on both sides because producer and consumers walk the same stage sequence. With late scaling a consumer
// warp takes every kWK-th stage, so the depth is a multiple of kWK (wna16_stream_ring_stages): the warp's previous
// stage on a slot is then the slot's previous stage, and a parity wait cannot be met by a phase two behind.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "core/env_switch.h"
#include "kernels/cuda/bulk_pipeline.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wna16_dispatch.h"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_fast_kernels.h"
#include "kernels/cuda/wna16_fast_paths.h"

namespace qlm::cuda {
namespace {

constexpr int kWN = 4;  // consumer warps (column blocks of 64) along N
constexpr int kCols = kWN * 64;
constexpr int kRedRow = kCols + 4;                 // floats per token row of the reduction tile
constexpr int kMaxStages = kWna16StreamMaxStages;  // the deepest ring (16 KB of codes per stage)

template <int BITS, int MT>
struct StreamShape {
  // 4-bit codes at one or two m-tiles: late scaling (raw_tile4 / apply_group in wna16_fast_device.cuh) and whole
  // stages per warp: consumer warp (wn, p) takes column block wn, all KS k-tiles, of every kWK-th stage
  // (those with p = stage index mod kWK), so kWK stages are in the consumers' hands at once. Otherwise
  // warp (wn, wk) takes k-tiles [wk * KH, (wk + 1) * KH) of column block wn of every stage.
  static constexpr bool kLate = BITS == 4 && MT <= 2;
  // Consumer warps: 4 along N (one per column block) x kWK. Measured on the H200 (notes): one stage per
  // warp at a time left the late kernel latency-bound at 8 warps (v5e: 2.2 warps and 0.44 issued
  // instructions per scheduler and cycle); without late scaling, at two m-tiles 16 warps were 10-35 % faster
  // than 8 on 4096-wide layers; at four, 16 would not fit the registers.
  static constexpr int kConsumerWarps = kLate ? (MT == 1 ? 12 : 8) : MT == 2 ? 16 : 8;
  static constexpr int kWK = kConsumerWarps / kWN;
  static constexpr int kConsumers = kConsumerWarps * 32;
  // Producer warps owning the ring's slots (produce_stages), 1 to kMaxProducerWarps, chosen per launch
  // (stream_producers; default 3). With one, its issue latency per stage (four code copies one after another,
  // scales, x) paced the ring at one token while its scheduler also ran consumers (H200, Nsight Compute: the
  // consumers waited on full stages 46 % of the time, the producer never on an empty one; without consumer math the
  // same producer streamed at the copy floor); two took 70b.gate_up at one token from 79 to 65 us, three to 63 (v7k,
  // v7l). The launch bounds allow the most (register caps checked with ptxas: the same registers and spills as with a
  // bound of two).
  static constexpr int kMaxProducerWarps = 3;
  static constexpr int kMaxThreads = kConsumers + 32 * kMaxProducerWarps;
  static constexpr int V = BITS / 4;
  static constexpr int KS = 8 / V;  // k-tiles per stage: 16 KB of codes per stage for either width
  static constexpr int TM = 8 * MT;
  static constexpr int KH = kLate ? KS : KS / kWK;                  // k-tiles per consumer warp and stage
  static constexpr int kStageWarps = kLate ? kWN : kConsumerWarps;  // consumer warps reading each stage
  static constexpr int XRow = KS * 16 + 16;  // halves per token row (padded: conflict-free B loads; the x box width)
  static constexpr int kCodeBytes = kWN * KS * V * 512;
  // A stage in shared memory: codes (kCodeBytes), the scale (and zero) groups (par_bytes each), then the
  // x rows of the call's tokens (min(M, TM) rows of XRow halves: fewer rows, deeper ring).
  static constexpr int kRedBytes = TM * kRedRow * 4;
};

template <int BITS, bool BF16, int MT, bool ZP>
__global__ void __launch_bounds__(StreamShape<BITS, MT>::kMaxThreads, 1)
    stream_kernel(const __grid_constant__ CUtensorMap xmap, bool x_box, const Wna16FastArgs w,
                  const uint16_t* __restrict__ x, int64_t ldx, int M, int stages, int stage_bytes, int par_bytes,
                  int64_t max_segments, float* __restrict__ ws, unsigned* __restrict__ counters, bool acq_rel_fixup,
                  const float* __restrict__ bias, uint16_t* __restrict__ y) {
  // Every stage is released by all the warps that read it (the empty barriers' count).
  static_assert(StreamShape<BITS, MT>::kStageWarps >= 1 &&
                StreamShape<BITS, MT>::kStageWarps <= StreamShape<BITS, MT>::kConsumerWarps);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using namespace bulk;
  using S = StreamShape<BITS, MT>;
  constexpr int V = S::V, KS = S::KS, TM = S::TM, XRow = S::XRow;
  constexpr int kCodeBytes = S::kCodeBytes;
  constexpr int KH = S::KH, kWK = S::kWK, kConsumerWarps = S::kConsumerWarps, kConsumers = S::kConsumers;
  constexpr bool kLate = S::kLate;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxStages];  // full[0..stages), empty[kMaxStages..)
  __shared__ bool last_segment;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t n_blocks = w.n_blocks, k_tiles = w.k_tiles;
  const int tpg = static_cast<int>(w.tiles_per_group);
  const int64_t per_tile = (k_tiles + KS - 1) / KS;  // stages per column tile
  const int64_t n_tiles = (n_blocks + kWN - 1) / kWN;
  const int64_t T = n_tiles * per_tile, G = gridDim.x;
  const int64_t q_begin = blockIdx.x * T / G, q_end = (blockIdx.x + 1) * T / G;
  const int rows = min(TM, M);
  const int x_off = kCodeBytes + (ZP ? 2 : 1) * par_bytes;  // the stage's x rows
  const uint32_t sbase = smem_addr(smem);
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kMaxStages]);

  allow_dependents();  // the next kernel may take this SM once this block has left it
  if (tid == 0) {
    for (int i = 0; i < stages; ++i) {
      mbar_init(full0 + 8 * i, 1);
      mbar_init(empty0 + 8 * i, S::kStageWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp >= kConsumerWarps) {  // producers
    const uint64_t policy = evict_first_policy();
    // The x box lands at the stage's x region, which must be 128-byte aligned (stage_bytes and x_off are
    // multiples of 128 by the plan; the dynamic shared memory's base is checked here). One m-tile has at most
    // 8 rows: their copies never measured as a cost, and the box's registers would spill there.
    const bool box = MT > 1 && x_box && sbase % 128 == 0;
    if (box && lane == 0) prefetch_tensor_map(&xmap);
    const uint32_t x_bytes = box ? rows * XRow * 2 : 0;  // per stage with the box; else rows * nkt * 32
    const uint4* codes = reinterpret_cast<const uint4*>(w.codes);
    // The copies of the stage at cursor c into ring slot `slot`: the weights (codes, scales, zeros, with the
    // stage's expect_tx) and / or the x rows.
    const auto copy_stage = [&](const StageCursor& c, int slot, bool weights, bool x_rows) {
      const int64_t k0 = c.j * KS;
      const int64_t nb0 = c.tile * kWN;
      const int nvalid = static_cast<int>(n_blocks - nb0 < kWN ? n_blocks - nb0 : kWN);
      const int nkt = static_cast<int>(k_tiles - k0 < KS ? k_tiles - k0 : KS);
      const uint32_t base = sbase + slot * stage_bytes, bar = full0 + 8 * slot;
      if (weights) {
        const int ng = c.groups(nkt, tpg);
        const uint32_t code_bytes = nkt * V * 512;
        const uint32_t bytes =
            nvalid * code_bytes + (box ? x_bytes : rows * nkt * 32) + (ZP ? 2 : 1) * ng * nvalid * 128;
        if (lane == 0) mbar_expect_tx(bar, bytes);
        __syncwarp();
        if (lane < nvalid)
          bulk_load_hint(base + lane * (KS * V * 512), codes + ((nb0 + lane) * k_tiles + k0) * (V * 32), code_bytes,
                         bar, policy);
        load_group_params<ZP, kWN>(lane, ng, c.g_lo, n_blocks, nb0, nvalid, w.scales, w.zeros, base + kCodeBytes,
                                   par_bytes, bar);
      }
      if (x_rows && box && lane == 0) tensor_load_2d(base + x_off, &xmap, static_cast<int>(k0 * 16), 0, bar);
      if (x_rows && !box && lane < rows)
        bulk_load(base + x_off + lane * (XRow * 2), x + lane * ldx + k0 * 16, nkt * 32, bar);
    };
    // Position by counting (a 64-bit division per stage made this warp the bottleneck); the first ring's weights
    // before the wait for the previous kernel, whose output x may be, their x rows after.
    produce_stages(q_begin, q_end, per_tile, KS, tpg, stages, empty0, copy_stage, warp - kConsumerWarps,
                   static_cast<int>(blockDim.x / 32) - kConsumerWarps);
    return;
  }

  // Consumers: warp (wn, wk) owns column block wn of the tile and k-tiles [kl0, kl0 + KH) of a stage: of
  // each stage, or with late scaling of every kWK-th stage (wk = stage index mod kWK) and all its k-tiles.
  const int wn = warp % kWN, wk = warp / kWN;
  const int kl0 = kLate ? 0 : wk * KH;
  // Late scaling: one scale group per stage (tpg a multiple of KS: g128 and coarser; stages start at
  // multiples of KS) takes the path without per-k-tile bookkeeping.
  const bool one_group = kLate && tpg % KH == 0;
  const int g = lane >> 2, t = lane & 3;
  // The x row of token mt * 8 + g in a stage; tokens past M (their results are never stored) read the last row.
  int xrow[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) xrow[mt] = min(mt * 8 + g, rows - 1);
  float* red = reinterpret_cast<float*>(smem + stages * stage_bytes);
  const uint4 zconst = make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
  int slot = 0;  // ring slot and phase of the next stage, advanced like the producer's
  uint32_t phase = 0;
  int64_t q = q_begin;
  while (q < q_end) {
    const int64_t nt = q / per_tile, j0 = q % per_tile;
    const int64_t j1 = min(per_tile, j0 + (q_end - q));  // this segment: stages [j0, j1) of tile nt
    const int64_t nb0 = nt * kWN;
    const bool warp_active = nb0 + wn < n_blocks;

    float acc[4][MT][4];
    zero_block_acc<MT>(acc);

    if constexpr (kLate) {
      // This warp's stages of the segment: every kWK-th of the block's stage sequence, from the first whose
      // index i (since q_begin) is wk mod kWK; ring slot i mod stages, phase (i / stages) & 1.
      const int64_t i0 = q - q_begin;
      const int64_t skip = ((wk - i0 % kWK) % kWK + kWK) % kWK;
      int lslot = static_cast<int>((i0 + skip) % stages);
      uint32_t lphase = static_cast<uint32_t>(((i0 + skip) / stages) & 1);
      for (int64_t j = j0 + skip; j < j1; j += kWK) {
        mbar_wait(full0 + 8 * lslot, lphase);
        const int64_t k0 = j * KS;
        const int left = static_cast<int>(k_tiles - k0 < KH ? k_tiles - k0 : KH);  // k-tiles of the stage
        const unsigned char* sp = smem + lslot * stage_bytes;
        const uint4* sc = reinterpret_cast<const uint4*>(sp) + wn * KS * 32 + lane;
        const uint16_t* sx = reinterpret_cast<const uint16_t*>(sp + x_off) + 4 * t;
        const uint4* ss = reinterpret_cast<const uint4*>(sp + kCodeBytes) + wn * 8 + g;
        const uint4* sz = reinterpret_cast<const uint4*>(sp + kCodeBytes + par_bytes) + wn * 8 + g;
        const auto x_frag = [&](int kl, uint2(&xb)[MT]) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) xb[mt] = *reinterpret_cast<const uint2*>(sx + xrow[mt] * XRow + kl * 16);
        };
        const auto release = [&] {
          __syncwarp();
          if (lane == 0) mbar_arrive(empty0 + 8 * lslot);
        };
        // Scale / zero group r of the stage (r = 0: the group of its first k-tile).
        const auto params = [&](int r, uint4& s4, uint4& z4) {
          s4 = ss[r * kWN * 8];
          z4 = ZP ? sz[r * kWN * 8] : zconst;
        };
        if (!warp_active) {
          release();
        } else if (one_group && left == KH) {
          // One group: every fragment into registers, the slot released (back in flight during the math).
          uint4 s4, z4, wv[KH];
          uint2 xb[KH][MT];
          params(0, s4, z4);
#pragma unroll
          for (int ii = 0; ii < KH; ++ii) wv[ii] = sc[ii * 32], x_frag(ii, xb[ii]);
          release();
          float accg[4][MT][4], xsum[MT][4];
          zero_late_sums<MT>(accg, xsum);
#pragma unroll
          for (int ii = 0; ii < KH; ++ii) late_k_tile<BF16, MT>(wv[ii], xb[ii], accg, xsum);
          apply_group<BF16, MT>(s4, z4, accg, xsum, acc);
        } else if (tpg < KH && KH % tpg == 0 && left == KH) {
          // Groups of 1, 2 or 4 k-tiles: their scales every tpg k-tiles, unrolled (one instance per size).
          const auto groups_of = [&](auto size) {
            constexpr int FE = decltype(size)::value;
            float accg[4][MT][4], xsum[MT][4];
            zero_late_sums<MT>(accg, xsum);
#pragma unroll
            for (int h = 0; h < KH; h += FE) {
              uint4 wv[FE], s4, z4;
              uint2 xb[FE][MT];
#pragma unroll
              for (int ii = 0; ii < FE; ++ii) wv[ii] = sc[(h + ii) * 32], x_frag(h + ii, xb[ii]);
              params(h / FE, s4, z4);
#pragma unroll
              for (int ii = 0; ii < FE; ++ii) late_k_tile<BF16, MT>(wv[ii], xb[ii], accg, xsum);
              apply_group<BF16, MT>(s4, z4, accg, xsum, acc);
            }
            release();
          };
          if (tpg == 4)
            groups_of(std::integral_constant<int, 4>{});
          else if (tpg == 2)
            groups_of(std::integral_constant<int, 2>{});
          else
            groups_of(std::integral_constant<int, 1>{});
        } else {
          // Any groups, partial stages: k-tile by k-tile, a group's scales at its last k-tile of the stage.
          float accg[4][MT][4], xsum[MT][4];
          zero_late_sums<MT>(accg, xsum);
          int rk = static_cast<int>(k0 % tpg), r = 0;
          for (int ii = 0; ii < left; ++ii) {
            uint2 xb[MT];
            x_frag(ii, xb);
            late_k_tile<BF16, MT>(sc[ii * 32], xb, accg, xsum);
            if (rk + 1 == tpg || ii + 1 == left) {
              uint4 s4, z4;
              params(r, s4, z4);
              apply_group<BF16, MT>(s4, z4, accg, xsum, acc);
            }
            if (++rk == tpg) rk = 0, ++r;
          }
          release();
        }
        lslot += kWK;
        while (lslot >= stages) lslot -= stages, lphase ^= 1u;
      }
    } else {
      // Group of the stage's first k-tile (gl, rl) and of this warp's first k-tile (ga, ra): index and
      // position inside the group, advanced by counting instead of dividing per k-tile.
      int64_t gl = (j0 * KS) / tpg;
      int rl = static_cast<int>((j0 * KS) % tpg);
      int64_t ga = (j0 * KS + kl0) / tpg;
      int ra = static_cast<int>((j0 * KS + kl0) % tpg);
      for (int64_t j = j0; j < j1; ++j) {
        mbar_wait(full0 + 8 * slot, phase);
        const int64_t k0 = j * KS;
        // This warp's k-tiles of the stage that exist (all KH but in a tile's last, partial stage).
        const int64_t left = k_tiles - (k0 + kl0);
        if (warp_active && left > 0) {
          const unsigned char* sp = smem + slot * stage_bytes;
          const uint4* sc = reinterpret_cast<const uint4*>(sp);
          const uint16_t* sx = reinterpret_cast<const uint16_t*>(sp + x_off);
          const uint4* ss = reinterpret_cast<const uint4*>(sp + kCodeBytes);
          const uint4* sz = reinterpret_cast<const uint4*>(sp + kCodeBytes + par_bytes);
          // All loads of the warp's k-tiles first, then the math: the shared-memory latency is paid once
          // per stage, not once per k-tile. `valid` is KH (a constant after inlining) but in partial stages.
          auto compute = [&](const int valid) {
            uint4 wv[KH][V], sv[KH], zv[KH];
            uint2 xb[KH][MT];
            int64_t gk = ga;
            int rk = ra;
#pragma unroll
            for (int ii = 0; ii < KH; ++ii) {
              const int kl = kl0 + ii;
              if (ii < valid) {
#pragma unroll
                for (int v = 0; v < V; ++v) wv[ii][v] = sc[((wn * KS + kl) * V + v) * 32 + lane];
                const int pi = (static_cast<int>(gk - gl) * kWN + wn) * 8 + g;
                sv[ii] = ss[pi];
                zv[ii] = zconst;
                if constexpr (ZP) zv[ii] = sz[pi];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                  xb[ii][mt] = *reinterpret_cast<const uint2*>(sx + xrow[mt] * XRow + kl * 16 + 4 * t);
              }
              if (++rk == tpg) {
                rk = 0;
                ++gk;
              }
            }
#pragma unroll
            for (int ii = 0; ii < KH; ++ii) {
              if (ii < valid) {
#pragma unroll
                for (int jj = 0; jj < 4; ++jj) {
                  uint32_t a[4];
                  dequant_block_tile<BITS, BF16>(wv[ii], sv[ii], zv[ii], jj, a);
#pragma unroll
                  for (int mt = 0; mt < MT; ++mt) mma16816<BF16>(acc[jj][mt], a, xb[ii][mt].x, xb[ii][mt].y);
                }
              }
            }
          };
          if (left >= KH) {
            compute(KH);
          } else {
            compute(static_cast<int>(left));
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * slot);
        if (++slot == stages) slot = 0, phase ^= 1u;
        // Next stage: both positions move by KS k-tiles.
        rl += KS;
        ra += KS;
        while (rl >= tpg) rl -= tpg, ++gl;
        while (ra >= tpg) ra -= tpg, ++ga;
      }
    }

    // Sum the kWK k-slices (stage phases with late scaling): [token][column] floats in the reduction tile
    // (not part of the ring).
    sum_k_slices<kWK, MT>(red, kRedRow, wn, wk, g, t, acc, [] { consumer_sync<kConsumers>(); });

    const int64_t n0 = nb0 * 64;
    if (j0 == 0 && j1 == per_tile) {  // the whole tile: write y
      for (int e = tid; e < rows * kCols; e += kConsumers) {
        const int ml = e / kCols, nl = e % kCols;
        const int64_t n = n0 + nl;
        if (n < w.N) {
          float v = red[ml * kRedRow + nl];
          if (bias) v += bias[n];
          y[ml * w.N + n] = to_bits(v, BF16);
        }
      }
    } else {
      const int64_t tile_q0 = nt * per_tile;
      const int64_t first = owner_of(tile_q0, T, G);
      const int64_t segments = owner_of(tile_q0 + per_tile - 1, T, G) - first + 1;
      constexpr int kTileFloats = TM * kCols;
      float* tile_ws = ws + nt * max_segments * kTileFloats;
      float* mine = tile_ws + (blockIdx.x - first) * kTileFloats;
      for (int e = tid; e < rows * kCols; e += kConsumers) __stcg(mine + e, red[(e / kCols) * kRedRow + e % kCols]);
      count_tile_segment<kConsumers>(counters, nt, segments, acq_rel_fixup, last_segment, tid);
      if (last_segment) {
        if (!acq_rel_fixup) __threadfence();
        // Element tid + r * kConsumers of the tile in v[r].
        constexpr int kPer = (TM * kCols + kConsumers - 1) / kConsumers;
        const int used = rows * kCols;
        float v[kPer];
        sum_partial_slots(tile_ws, kTileFloats, segments, tid, kConsumers, used, v);
#pragma unroll
        for (int r = 0; r < kPer; ++r) {
          const int e = tid + r * kConsumers;
          const int64_t n = n0 + e % kCols;
          if (e < used && n < w.N) {
            float out = v[r];
            if (bias) out += bias[n];
            y[(e / kCols) * w.N + n] = to_bits(out, BF16);
          }
        }
        if (tid == 0) counters[nt] = 0u;
      }
    }
    consumer_sync<kConsumers>();  // the reduction tile and last_segment are reused by the next segment
    q += j1 - j0;
  }
#else
  static_assert(StreamShape<BITS, MT>::KH > 0);
  __trap();  // sm_90 only: the host never launches it elsewhere (wna16_stream_usable)
#endif
}

template <int BITS, bool BF16, int MT, bool ZP>
int stage_bytes_of(int par_bytes, int rows) {
  using S = StreamShape<BITS, MT>;
  // A multiple of 128 bytes, so every stage's x region (at kCodeBytes + parameters, both multiples of 128)
  // is aligned for the x box.
  return (S::kCodeBytes + (ZP ? 2 : 1) * par_bytes + rows * S::XRow * 2 + 127) / 128 * 128;
}

// Dynamic shared memory the device allows one block (set once per instantiation), 0 if unknown.
template <int BITS, bool BF16, int MT, bool ZP>
int smem_limit() {
  static const int limit = [] {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
      return 0;
    const int usable = optin - 1024;  // the static barriers and flag
    if (cudaFuncSetAttribute(stream_kernel<BITS, BF16, MT, ZP>, cudaFuncAttributeMaxDynamicSharedMemorySize, usable) !=
        cudaSuccess)
      return 0;
    return usable;
  }();
  return limit;
}

struct Plan {
  int stages = 0, stage_bytes = 0, par_bytes = 0;
  size_t smem = 0;
};

// The ring for calls of `rows` tokens (rows <= TM; TM rows: the deepest ring any M gets).
template <int BITS, bool BF16, int MT, bool ZP>
Plan plan_of(const Wna16FastArgs& w, int rows) {
  using S = StreamShape<BITS, MT>;
  const int64_t tpg = std::max<int64_t>(1, w.tiles_per_group);
  const int gslots = static_cast<int>(std::min<int64_t>(S::KS, (S::KS - 1) / tpg + 2));
  Plan p;
  p.par_bytes = gslots * kWN * 128;
  p.stage_bytes = stage_bytes_of<BITS, BF16, MT, ZP>(p.par_bytes, rows);
  const int limit = smem_limit<BITS, BF16, MT, ZP>();
  // The cap: the tests' override, QLM_W4FAST_STREAM_MAX_STAGES=n (2 to 12, tuning) or wna16_stream_default_stages
  // (fewer at one m-tile, so the block leaves shared memory for the neighbouring kernels' blocks); at least one stage
  // per warp phase. The depth is a multiple of the warp phases (wna16_stream_ring_stages: the consumers' mbarrier
  // parity waits rely on it).
  static const int64_t env_stages = env_int("QLM_W4FAST_STREAM_MAX_STAGES", 0);
  const int64_t set = wna16_setting(wna16_stream_max_stages_override(), env_stages, 0);
  const int phases = S::kLate ? S::kWK : 1;
  const int cap = std::max(
      phases, set > 0 ? static_cast<int>(std::clamp<int64_t>(set, 2, kMaxStages)) : wna16_stream_default_stages(MT));
  p.stages = limit > S::kRedBytes ? wna16_stream_ring_stages((limit - S::kRedBytes) / p.stage_bytes, cap, phases) : 0;
  p.smem = static_cast<size_t>(p.stages) * p.stage_bytes + S::kRedBytes;
  return p;
}

// Producer warps per block: the tests' override, QLM_W4FAST_STREAM_PRODUCERS=n (tuning), else 3; at most the
// kernel's launch bound.
template <typename S>
int stream_producers() {
  static const int64_t env = env_int("QLM_W4FAST_STREAM_PRODUCERS", 0);
  return static_cast<int>(
      std::clamp<int64_t>(wna16_setting(wna16_stream_producers_override(), env, 3), 1, S::kMaxProducerWarps));
}

template <int BITS, bool BF16, int MT, bool ZP>
cudaError_t launch(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int blocks, float* ws,
                   unsigned* counters, bool acq_rel_fixup, const float* bias, void* y, bool pdl, bool x_boxes,
                   cudaStream_t stream) {
  using S = StreamShape<BITS, MT>;
  const int rows = static_cast<int>(std::min<int64_t>(M, S::TM));
  const Plan p = plan_of<BITS, BF16, MT, ZP>(w, rows);
  if (p.stages == 0) return cudaErrorInvalidValue;
  // x in boxes of every token row x one stage's k (XRow columns: the stage's k plus the padding, which
  // is never read); zeros past K. One m-tile copies x per row (the kernel never reads the map there), so its
  // calls, the decode steps, encode no map.
  CUtensorMap xmap{};
  const bool x_box = MT > 1 && x_boxes &&
                     encode_u16_tensor_map(&xmap, x, static_cast<uint64_t>(w.k_tiles * 16), static_cast<uint64_t>(M),
                                           ldx, S::XRow, static_cast<uint32_t>(rows), CU_TENSOR_MAP_SWIZZLE_NONE);
  const cudaError_t e = launch_pdl_if(pdl, stream_kernel<BITS, BF16, MT, ZP>, dim3(blocks),
                                      dim3(S::kConsumers + 32 * stream_producers<S>()), p.smem, stream, xmap, x_box, w,
                                      static_cast<const uint16_t*>(x), ldx, static_cast<int>(M), p.stages,
                                      p.stage_bytes, p.par_bytes, wna16_stream_max_segments(w, M, blocks), ws, counters,
                                      acq_rel_fixup, bias, static_cast<uint16_t*>(y));
  return e != cudaSuccess ? e : cudaGetLastError();
}

int stages_per_tile(const Wna16FastArgs& w) {
  const int64_t ks = 8 / (w.bits / 4);
  return static_cast<int>((w.k_tiles + ks - 1) / ks);
}

}  // namespace

int64_t wna16_stream_stage_count(const Wna16FastArgs& w) { return stages_per_tile(w) * ((w.n_blocks + kWN - 1) / kWN); }

int64_t wna16_stream_max_segments(const Wna16FastArgs& w, int64_t, int blocks) {
  // A tile of P consecutive stages meets at most ceil(P * G / T) + 1 of the G equal block ranges.
  const int64_t P = stages_per_tile(w), T = wna16_stream_stage_count(w), G = std::max(1, blocks);
  return (P * G + T - 1) / T + 1;
}

bool wna16_stream_usable(const Wna16FastArgs& w, int mt) {
  return wna16_dispatch<1, 2, 4>(
      w.bits, w.bf16, mt, w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        return plan_of<V::kBits, V::kBf16, V::kMt, V::kZp>(w, StreamShape<V::kBits, V::kMt>::TM).stages > 0;
      },
      false);
}

cudaError_t launch_wna16_stream_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int mt, int blocks,
                                     float* ws, unsigned* counters, bool acq_rel_fixup, const float* bias, void* y,
                                     bool pdl, bool x_boxes, cudaStream_t stream) {
  return wna16_dispatch<1, 2, 4>(
      w.bits, w.bf16, mt, w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        return launch<V::kBits, V::kBf16, V::kMt, V::kZp>(w, x, ldx, M, blocks, ws, counters, acq_rel_fixup, bias, y,
                                                          pdl, x_boxes, stream);
      },
      cudaErrorInvalidValue);
}

}  // namespace qlm::cuda
