// The GEMV-shaped kernel of `cuda_wna16_fast` for 4-bit codes and few tokens (the "gemv" path;
// layout: wna16_fast_layout.h). Why another small-M kernel beside the stream kernel: a probe that only
// reads the bytes (bench/probes/read_bw_by_size.cu) moves a 32 MB layer at 89 % of the copy floor and an
// 8 MB one at 62 % when called back to back with programmatic dependent launch, while the stream kernel
// fits ~7.6 us + bytes / 3.3 TB/s (its pipeline fill, the drain through its consumers and the stream-K
// partial sums): on the layers of 8-40 MB it ran at 25-51 % of the floor. Here nothing stands between the
// loads and the math:
//
// - every warp streams its own run of k-tiles of one 64-column block straight into registers (one
//   16-byte evict-first load per lane and k-tile, kDepth k-tiles ahead), with the token rows' B fragments
//   loaded the same distance ahead;
// - late scaling (wna16_fast_device.cuh): MMAs on the raw codes base + c, an all-ones MMA for the sum of x,
//   and at every scale-group change (and at the warp's end) the group's share s * (sum - (base + z) sum x)
//   is added in f32. A warp's run may start or end inside a group: the share is linear over k-tiles;
// - the block's warps sum in shared memory; with split-K each block writes its partial tile to ws and the
//   last block of a tile to finish sums the slots in slot order (deterministic) and writes y;
// - programmatic dependent launch: the first kDepth k-tiles of weights are requested before
//   griddepcontrol.wait (kernels never write weights); x, ws, counters and y are touched only after it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/wna16_dispatch.h"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_fast_kernels.h"

namespace qlm::cuda {
namespace {

constexpr int kWarps = kWna16Gemv4Warps;

// k-tiles of weights in flight per warp: one 16-byte code word each.
template <int MT>
inline constexpr int kDepth = MT == 1 ? 8 : 4;
constexpr int kDepthX = 2;
static_assert(kDepth<1> % kDepthX == 0 && kDepth<2> % kDepthX == 0 && kDepth<4> % kDepthX == 0);

template <bool BF16, int MT, bool ZP>
__global__ void __launch_bounds__(kWarps * 32, MT == 1 ? 2 : 1)
    gemv4_kernel(const Wna16FastArgs w, const uint16_t* __restrict__ x, int64_t ldx, int M, int tiles_per_split,
                 int splits, float* __restrict__ ws, unsigned* __restrict__ counters, const float* __restrict__ bias,
                 uint16_t* __restrict__ y) {
  constexpr int D = kDepth<MT>;
  constexpr int TM = 8 * MT;  // rows of the m-tile
  __shared__ float red[TM * 64];
  __shared__ bool last_block;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int mi = blockIdx.x, b = blockIdx.y, s = blockIdx.z;
  const int m0 = mi * TM;
  const int64_t k_tiles = w.k_tiles;

  // k-tile indices fit in int: the layout has k_tiles = rows / 16 < 2^31 (the host checks K against INT_MAX / 64).
  // The warp's k-tiles: one contiguous run [kb, ke) of the block's range.
  const int block_begin = s * tiles_per_split;
  const int block_end = min(static_cast<int>(k_tiles), block_begin + tiles_per_split);
  const int per_warp = max(0, (block_end - block_begin + kWarps - 1) / kWarps);
  const int kb = block_begin + warp * per_warp;
  const int ke = min(block_end, kb + per_warp);
  const int k_last = ke - 1;

  const uint4* codes = reinterpret_cast<const uint4*>(w.codes) + static_cast<int64_t>(b) * k_tiles * 32 + lane;
  const uint64_t policy = evict_first_policy();
  // Prefetches past the run re-read its last k-tile, so every ring load is unconditional (a conditional load
  // makes the compiler copy ring registers, and a copy waits for the load in flight).
  uint4 ring[D];
  if (kb < ke) {
#pragma unroll
    for (int i = 0; i < D; ++i) ring[i] = ld_stream(codes + static_cast<int64_t>(min(kb + i, k_last)) * 32, policy);
  }

  for (int i = threadIdx.x; i < TM * 64; i += kWarps * 32) red[i] = 0.0f;
  pdl_enter();  // x comes from the previous kernel; ws, counters and y may still be read by it

  // Token rows past M read row 0 (finite values): their sums are never stored.
  const uint16_t* xp[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int row = m0 + mt * 8 + g;
    xp[mt] = x + static_cast<int64_t>(row < M ? row : 0) * ldx + 4 * t;
  }
  auto load_x = [&](uint2(&xb)[MT], int kt) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) xb[mt] = __ldg(reinterpret_cast<const uint2*>(xp[mt] + kt * 16));
  };
  // x (L2-resident, written by the previous kernel) needs a shorter lead than the weights: kDepthX k-tiles.
  uint2 xr[kDepthX][MT];
  if (kb < ke) {
#pragma unroll
    for (int i = 0; i < kDepthX; ++i) load_x(xr[i], min(kb + i, k_last));
  }

  const int tpg = static_cast<int>(w.tiles_per_group);
  const int64_t group_stride = w.n_blocks * 8;
  const uint4* sc = reinterpret_cast<const uint4*>(w.scales) + b * 8 + g;
  const uint4* zc = ZP ? reinterpret_cast<const uint4*>(w.zeros) + b * 8 + g : nullptr;
  const uint4 zconst = make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
  int grp = kb < ke ? kb / tpg : 0;
  int next_group = (grp + 1) * tpg;  // first k-tile of the next scale group
  uint4 sv = kb < ke ? __ldg(sc + grp * group_stride) : zconst;
  uint4 zv = ZP && kb < ke ? __ldg(zc + grp * group_stride) : zconst;

  float acc[4][MT][4], accg[4][MT][4], xsum[MT][4];
  zero_late_sums<MT>(accg, xsum);
  zero_block_acc<MT>(acc);

  // k-tile k from code ring slot i and x ring slot i % kDepthX; the slots are refilled with k-tile k + D
  // (k + kDepthX) as they are taken. A group's share is added when k reaches the next group.
  auto step = [&](int i, int k) {
    const uint4 cw = ring[i];
    uint2 xb[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) xb[mt] = xr[i % kDepthX][mt];
    ring[i] = ld_stream(codes + static_cast<int64_t>(min(k + D, k_last)) * 32, policy);
    load_x(xr[i % kDepthX], min(k + kDepthX, k_last));
    if (k == next_group) {
      apply_group<BF16, MT>(sv, zv, accg, xsum, acc);
      grp += 1;
      next_group += tpg;
      sv = __ldg(sc + grp * group_stride);
      if constexpr (ZP) zv = __ldg(zc + grp * group_stride);
    }
    late_k_tile<BF16, MT>(cw, xb, accg, xsum);
  };
  int k = kb;
  for (; k + D <= ke; k += D) {
#pragma unroll
    for (int i = 0; i < D; ++i) step(i, k + i);
  }
#pragma unroll
  for (int i = 0; i < D; ++i)
    if (k + i < ke) step(i, k + i);
  if (kb < ke) apply_group<BF16, MT>(sv, zv, accg, xsum, acc);

  __syncthreads();  // red zeroed by every thread
  atomic_add_block_acc<MT>(red, acc, m0, M, g, t);
  __syncthreads();

  const int64_t n0 = static_cast<int64_t>(b) * 64;
  auto store = [&](int i, float v) {
    const int ml = i >> 6, nl = i & 63;
    const int64_t n = n0 + nl;
    if (m0 + ml < M && n < w.N) {
      if (bias) v += bias[n];
      y[static_cast<int64_t>(m0 + ml) * w.N + n] = to_bits(v, BF16);
    }
  };
  if (splits == 1) {
    for (int i = threadIdx.x; i < TM * 64; i += kWarps * 32) store(i, red[i]);
    return;
  }
  const int64_t tile_index = static_cast<int64_t>(b) * gridDim.x + mi;
  const int64_t tile_count = static_cast<int64_t>(gridDim.x) * gridDim.y;
  // Only the rows with tokens are written and summed (M = 1: 64 floats per slot, not 512).
  const int used = min(TM, M - m0) * 64;
  float* mine = ws + (static_cast<int64_t>(s) * tile_count + tile_index) * (TM * 64);
  for (int i = threadIdx.x; i < used; i += kWarps * 32) __stcg(mine + i, red[i]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(counters + tile_index, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  constexpr int kPer = (TM * 64 + kWarps * 32 - 1) / (kWarps * 32);
  float v[kPer];  // element threadIdx.x + r * kWarps * 32 of the tile
  sum_partial_slots(ws + tile_index * (TM * 64), tile_count * (TM * 64), splits, threadIdx.x, kWarps * 32, used, v);
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int i = threadIdx.x + r * kWarps * 32;
    if (i < used) store(i, v[r]);
  }
  if (threadIdx.x == 0) counters[tile_index] = 0u;
}

template <bool BF16, int MT, bool ZP>
int occupancy_of() {
  static int cached = 0;
  if (cached == 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv4_kernel<BF16, MT, ZP>, kWarps * 32, 0) != cudaSuccess)
      n = 1;
    cached = n < 1 ? 1 : n;
  }
  return cached;
}

}  // namespace

int wna16_gemv4_occupancy(bool bf16, int mt, bool zp) {
  return wna16_dispatch<1, 2, 4>(
      4, bf16, mt, zp,
      [](auto v) {
        using V = decltype(v);
        if constexpr (V::kBits == 4) return occupancy_of<V::kBf16, V::kMt, V::kZp>();
        return 0;
      },
      0);
}

cudaError_t launch_wna16_gemv4(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                               unsigned* counters, const float* bias, void* y, cudaStream_t stream) {
  if (w.bits != 4) return cudaErrorInvalidValue;
  const int mt = wna16_fast_mt(M);
  const int64_t m_tiles = (M + 8 * mt - 1) / (8 * mt);
  const int tps = static_cast<int>((w.k_tiles + splits - 1) / splits);
  const dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(w.n_blocks), static_cast<unsigned>(splits));
  return wna16_dispatch<1, 2, 4>(
      4, w.bf16, mt, w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        if constexpr (V::kBits == 4)
          return launch_pdl(gemv4_kernel<V::kBf16, V::kMt, V::kZp>, grid, dim3(kWarps * 32), 0, stream, w,
                            static_cast<const uint16_t*>(x), ldx, static_cast<int>(M), tps, splits, ws, counters, bias,
                            static_cast<uint16_t*>(y));
        return cudaErrorInvalidValue;
      },
      cudaErrorInvalidValue);
}

}  // namespace qlm::cuda
