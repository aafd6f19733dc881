// The tiled GEMM of `cuda_wna16_fast` (layout: wna16_fast_layout.h): y^T = W^T x^T with mma.sync
// m16n8k16, the dequantized weights the A operand, 8 tokens per MMA on the n side.
//
// Block: 8 warps, a tile of 4 column blocks (256 output columns) x TM = 8 * MT tokens, over a k-range
// (split-K). Warp (wn, wk) owns column block wn of the tile and every other half-stage of k-tiles;
// each weight fragment it dequantizes feeds MT MMAs (all the tile's tokens). Per stage of 8 k-tiles
// the block copies, with cp.async into a multi-stage shared-memory ring, the codes of its 4 column
// blocks (contiguous in the layout: 8 x 512 bytes per block and vector), the token tile of x
// (rows >= M zero-filled) and the scales / zeros of the groups the stage touches. The two k-halves
// are summed through shared memory; splits > 1 write f32 partials and the last block of a tile sums
// them (counter per tile, reset by that block). Launched with programmatic dependent launch on sm_90
// (kernels/cuda/pdl.cuh): the first stages' weights are requested before the previous kernel ends.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/wna16_dispatch.h"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_fast_kernels.h"

namespace qlm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWN = 4;                // warps (column blocks of 64) along N
constexpr int kWK = 2;                // warps along K
constexpr int kKS = 8;                // k-tiles per stage
constexpr int kXRow = kKS * 16 + 16;  // halves per token row of the x tile (padded: no bank conflicts)
constexpr int kCols = kWN * 64;       // output columns of a block tile
constexpr int kRedRow = kCols + 4;    // floats per token row of the reduction tile

template <int BITS, int MT>
struct Shape {
  static constexpr int V = BITS / 4;
  static constexpr int TM = 8 * MT;
  static constexpr int kStages = (BITS == 8 && MT == 8) ? 3 : 4;
  static constexpr int kCodeBytes = kWN * kKS * V * 512;
  static constexpr int kXBytes = TM * kXRow * 2;
};

template <int BITS, bool BF16, int MT, bool ZP>
__global__ void __launch_bounds__(kThreads, (MT >= 4 || BITS == 8) ? 1 : 2)
    tiled_kernel(const Wna16FastArgs w, const uint16_t* __restrict__ x, int64_t ldx, int M, int tiles_per_split,
                 int splits, int gslots, uint64_t group_magic, int stream_hint, float* __restrict__ ws,
                 unsigned* __restrict__ counters, const float* __restrict__ bias, uint16_t* __restrict__ y) {
  using S = Shape<BITS, MT>;
  constexpr int V = S::V, TM = S::TM, ST = S::kStages;
  constexpr int kCodeBytes = S::kCodeBytes, kXBytes = S::kXBytes;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ bool last_block;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp % kWN, wk = warp / kWN;
  const int g = lane >> 2, t = lane & 3;
  const int mi = blockIdx.x, nt = blockIdx.y, s = blockIdx.z;
  const int m0 = mi * TM;
  const int64_t nb0 = static_cast<int64_t>(nt) * kWN;
  const int64_t n_blocks = w.n_blocks, k_tiles = w.k_tiles;
  const int64_t kb = static_cast<int64_t>(s) * tiles_per_split;
  const int64_t ke = min(k_tiles, kb + tiles_per_split);
  const int n_stages = static_cast<int>((ke - kb + kKS - 1) / kKS);
  const int par_bytes = gslots * kWN * 128;
  const int stage_bytes = kCodeBytes + kXBytes + (ZP ? 2 : 1) * par_bytes;
  const uint32_t sbase = smem_u32(smem);
  const uint64_t policy = evict_first_policy();

  const uint4* codes = reinterpret_cast<const uint4*>(w.codes);
  const uint4* scales = reinterpret_cast<const uint4*>(w.scales);
  const uint4* zeros = reinterpret_cast<const uint4*>(w.zeros);
  auto group_of = [&](int64_t kt) { return static_cast<int64_t>((static_cast<uint64_t>(kt) * group_magic) >> 32); };

  // A stage's weights (codes, scales, zeros: constant, so they may be requested before the previous
  // kernel ends) and its x tile (the previous kernel's output: after wait_for_predecessor).
  auto load_weights = [&](int slot, int st) {
    const int64_t k0 = kb + static_cast<int64_t>(st) * kKS;
    const uint32_t base = sbase + slot * stage_bytes;
    // Codes: [column block][k-tile][vector][lane] uint4, contiguous per column block in global.
    constexpr int kPerBlock = kKS * V * 32;
#pragma unroll
    for (int r = 0; r < kWN * kPerBlock / kThreads; ++r) {
      const int c = r * kThreads + tid;
      const int wc = c / kPerBlock, rem = c % kPerBlock;
      const int64_t b = nb0 + wc;
      if (b < n_blocks && k0 + rem / (V * 32) < ke) {
        const uint4* src = codes + (b * k_tiles + k0) * (V * 32) + rem;
        if (stream_hint)
          cp16_hint(base + c * 16, src, policy);
        else
          cp16(base + c * 16, src);
      }
    }
    // Scales (and zeros) of the groups g_lo..g_hi touched by this stage: [slot][column block][g].
    const int64_t g_lo = group_of(k0);
    const int64_t g_hi = group_of(min(k0 + kKS, ke) - 1);
    const int count = static_cast<int>(g_hi - g_lo + 1) * kWN * 8;
    for (int c = tid; c < count; c += kThreads) {
      const int gi = c / (kWN * 8), wc = (c / 8) % kWN, gg = c % 8;
      const int64_t b = nb0 + wc;
      if (b < n_blocks) {
        const int64_t src = ((g_lo + gi) * n_blocks + b) * 8 + gg;
        cp16(base + kCodeBytes + kXBytes + c * 16, scales + src);
        if constexpr (ZP) cp16(base + kCodeBytes + kXBytes + par_bytes + c * 16, zeros + src);
      }
    }
  };
  auto load_x = [&](int slot, int st) {
    const int64_t k0 = kb + static_cast<int64_t>(st) * kKS;
    const uint32_t base = sbase + slot * stage_bytes;
    // x: TM token rows x kKS * 16 halves (16 chunks of 8 halves), rows >= M zero.
#pragma unroll
    for (int it = 0; it < (TM * 16 + kThreads - 1) / kThreads; ++it) {
      const int c = it * kThreads + tid;
      const int r = c >> 4, q = c & 15;
      if ((TM * 16 % kThreads == 0 || c < TM * 16) && k0 + q / 2 < ke) {
        const bool valid = m0 + r < M;
        const uint16_t* src = x + static_cast<int64_t>(valid ? m0 + r : 0) * ldx + k0 * 16 + q * 8;
        cp16_zfill(base + kCodeBytes + (r * kXRow + q * 8) * 2, src, valid);
      }
    }
  };

  float acc[4][MT][4];
  zero_block_acc<MT>(acc);

  const uint4 zconst = make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
  const bool warp_active = nb0 + wn < n_blocks;

  auto compute = [&](int slot, int st) {
    const unsigned char* sp = smem + slot * stage_bytes;
    const uint4* sc = reinterpret_cast<const uint4*>(sp);
    const uint16_t* sx = reinterpret_cast<const uint16_t*>(sp + kCodeBytes);
    const uint4* ss = reinterpret_cast<const uint4*>(sp + kCodeBytes + kXBytes);
    const uint4* sz = reinterpret_cast<const uint4*>(sp + kCodeBytes + kXBytes + par_bytes);
    const int64_t k0 = kb + static_cast<int64_t>(st) * kKS;
    const int64_t g_lo = group_of(k0);
#pragma unroll
    for (int ii = 0; ii < kKS / kWK; ++ii) {
      const int i = wk * (kKS / kWK) + ii;
      const int64_t kt = k0 + i;
      if (kt < ke) {
        uint4 wv[V];
#pragma unroll
        for (int v = 0; v < V; ++v) wv[v] = sc[((wn * kKS + i) * V + v) * 32 + lane];
        const int pi = (static_cast<int>(group_of(kt) - g_lo) * kWN + wn) * 8 + g;
        const uint4 sv = ss[pi];
        uint4 zv = zconst;
        if constexpr (ZP) zv = sz[pi];
        uint2 xb[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          xb[mt] = *reinterpret_cast<const uint2*>(sx + (mt * 8 + g) * kXRow + i * 16 + 4 * t);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t a[4];
          dequant_block_tile<BITS, BF16>(wv, sv, zv, j, a);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma16816<BF16>(acc[j][mt], a, xb[mt].x, xb[mt].y);
        }
      }
    }
  };

  // Programmatic dependent launch: the first stages' weights go out before waiting for the previous
  // kernel (their cp.async groups are the first x group's: group i completes stage i either way).
#pragma unroll
  for (int i = 0; i < ST - 1; ++i)
    if (i < n_stages) load_weights(i, i);
  qlm::cuda::pdl_enter();
#pragma unroll
  for (int i = 0; i < ST - 1; ++i) {
    if (i < n_stages) load_x(i, i);
    cp_commit();
  }
  for (int st = 0; st < n_stages; ++st) {
    cp_wait<ST - 2>();
    __syncthreads();
    const int next = st + ST - 1;
    if (next < n_stages) {
      load_weights(next % ST, next);
      load_x(next % ST, next);
    }
    cp_commit();
    if (warp_active) compute(st % ST, st);
  }
  cp_wait<0>();
  __syncthreads();

  // Sum the k-halves in shared memory (the ring is free now): [token][column] floats.
  float* red = reinterpret_cast<float*>(smem);
  sum_k_slices<kWK, MT>(red, kRedRow, wn, wk, g, t, acc, [] { __syncthreads(); });

  const int64_t n0 = nb0 * 64;
  const int rows = min(TM, M - m0);
  if (splits == 1) {
    for (int i = tid; i < rows * kCols; i += kThreads) {
      const int ml = i / kCols, nl = i % kCols;
      const int64_t n = n0 + nl;
      if (n < w.N) {
        float v = red[ml * kRedRow + nl];
        if (bias) v += bias[n];
        y[static_cast<int64_t>(m0 + ml) * w.N + n] = to_bits(v, BF16);
      }
    }
    return;
  }
  const int64_t tile_index = static_cast<int64_t>(nt) * gridDim.x + mi;
  const int64_t tile_count = static_cast<int64_t>(gridDim.x) * gridDim.y;
  constexpr int kTileFloats = TM * kCols;
  float* mine = ws + (static_cast<int64_t>(s) * tile_count + tile_index) * kTileFloats;
  for (int i = tid; i < rows * kCols; i += kThreads) __stcg(mine + i, red[(i / kCols) * kRedRow + i % kCols]);
  __threadfence();
  __syncthreads();
  if (tid == 0) last_block = atomicAdd(counters + tile_index, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  constexpr int kPer = (kTileFloats + kThreads - 1) / kThreads;
  float v[kPer];  // element tid + r * kThreads of the tile
  sum_partial_slots(ws + tile_index * kTileFloats, tile_count * kTileFloats, splits, tid, kThreads, rows * kCols, v);
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int i = tid + r * kThreads;
    const int ml = i / kCols, nl = i % kCols;
    const int64_t n = n0 + nl;
    if (i < rows * kCols && n < w.N) {
      float out = v[r];
      if (bias) out += bias[n];
      y[static_cast<int64_t>(m0 + ml) * w.N + n] = to_bits(out, BF16);
    }
  }
  if (tid == 0) counters[tile_index] = 0u;
}

int group_slots(int64_t tiles_per_group) {
  return static_cast<int>(std::min<int64_t>(kKS, (kKS - 1) / std::max<int64_t>(1, tiles_per_group) + 2));
}

template <int BITS, bool BF16, int MT, bool ZP>
size_t smem_bytes(int gslots) {
  using S = Shape<BITS, MT>;
  const size_t stage = S::kCodeBytes + S::kXBytes + (ZP ? 2 : 1) * gslots * kWN * 128;
  const size_t red = static_cast<size_t>(S::TM) * kRedRow * 4;
  return std::max(stage * S::kStages, red);
}

template <int BITS, bool BF16, int MT, bool ZP>
bool raise_smem_limit() {
  static const bool ok = [] {
    return cudaFuncSetAttribute(tiled_kernel<BITS, BF16, MT, ZP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(smem_bytes<BITS, BF16, MT, ZP>(kKS))) == cudaSuccess;
  }();
  return ok;
}

template <int BITS, bool BF16, int MT, bool ZP>
int occupancy(int64_t tiles_per_group) {
  if (!raise_smem_limit<BITS, BF16, MT, ZP>()) return 0;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, tiled_kernel<BITS, BF16, MT, ZP>, kThreads,
                                                    smem_bytes<BITS, BF16, MT, ZP>(group_slots(tiles_per_group))) !=
      cudaSuccess)
    return 0;
  return n;
}

template <int BITS, bool BF16, int MT, bool ZP>
cudaError_t launch(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                   unsigned* counters, const float* bias, void* y, cudaStream_t stream) {
  if (!raise_smem_limit<BITS, BF16, MT, ZP>()) return cudaErrorInvalidValue;
  const int64_t m_tiles = (M + 8 * MT - 1) / (8 * MT);
  const int64_t n_tiles = (w.n_blocks + kWN - 1) / kWN;
  const int64_t tps = (w.k_tiles + splits - 1) / splits;
  const int real_splits = static_cast<int>((w.k_tiles + tps - 1) / tps);  // every split non-empty
  const int64_t d = w.tiles_per_group;
  const uint64_t magic = ((uint64_t{1} << 32) + d - 1) / d;
  const int gslots = group_slots(d);
  dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles), static_cast<unsigned>(real_splits));
  return qlm::cuda::launch_pdl(tiled_kernel<BITS, BF16, MT, ZP>, grid, kThreads, smem_bytes<BITS, BF16, MT, ZP>(gslots),
                               stream, w, static_cast<const uint16_t*>(x), ldx, static_cast<int>(M),
                               static_cast<int>(tps), real_splits, gslots, magic, m_tiles == 1 ? 1 : 0, ws, counters,
                               bias, static_cast<uint16_t*>(y));
}

}  // namespace

int wna16_tiled_occupancy(const Wna16FastArgs& w, int mt) {
  return wna16_dispatch<1, 2, 4, 8>(
      w.bits, w.bf16, mt, w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        return occupancy<V::kBits, V::kBf16, V::kMt, V::kZp>(w.tiles_per_group);
      },
      0);
}

cudaError_t launch_wna16_tiled_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int mt, int splits,
                                    float* ws, unsigned* counters, const float* bias, void* y, cudaStream_t stream) {
  return wna16_dispatch<1, 2, 4, 8>(
      w.bits, w.bf16, mt, w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        return launch<V::kBits, V::kBf16, V::kMt, V::kZp>(w, x, ldx, M, splits, ws, counters, bias, y, stream);
      },
      cudaErrorInvalidValue);
}

}  // namespace qlm::cuda
