// Kernels of `cuda_wna16_fast`: tensor-core (mma.sync m16n8k16) weight-only GEMM streaming repacked
// 8-bit codes once (4-bit codes: wna16_gemv4_kernels.cu), split-K with an in-kernel reduction by the last
// block of each tile; an activation gather for act-order / padded groups; and a dequantizer for the large-M cuBLAS
// path.
//
// Conversion (exact): a 4-bit code pair masked into the mantissas of 0x6400 (f16 1024) or 0x4300
// (bf16 128) is base + code; 8-bit f16 likewise with 0x6400; 8-bit bf16 goes through f32 (2^23 + code).
// Subtracting the stored zero_base + zero is exact (small integers); one rounding at the scale multiply.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/wna16_dispatch.h"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_fast_kernels.h"

namespace qlm::cuda {
namespace {

constexpr int kWarps = kWna16FastWarps;
constexpr int kDepth = 4;

template <int BITS, bool BF16, int MT, bool ZP>
__global__ void __launch_bounds__(kWarps * 32)
    gemm_kernel(const Wna16FastArgs w, const uint16_t* __restrict__ x, int64_t ldx, int M, int tiles_per_split,
                int splits, uint64_t group_magic, float* __restrict__ ws, unsigned* __restrict__ counters,
                const float* __restrict__ bias, uint16_t* __restrict__ y) {
  constexpr int V = BITS / 4;
  constexpr int TM = 8 * MT;  // rows of the m-tile
  __shared__ float red[TM * 64];
  __shared__ bool last_block;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int mi = blockIdx.x, b = blockIdx.y, s = blockIdx.z;
  const int m0 = mi * TM;
  const int64_t k_tiles = w.k_tiles;

  for (int i = threadIdx.x; i < TM * 64; i += kWarps * 32) red[i] = 0.0f;

  const int64_t block_begin = static_cast<int64_t>(s) * tiles_per_split;
  const int64_t block_end = min(k_tiles, block_begin + tiles_per_split);
  const int64_t per_warp = (block_end - block_begin + kWarps - 1) / kWarps;
  const int64_t kb = block_begin + warp * per_warp;
  const int64_t ke = min(block_end, kb + per_warp);

  const uint4* codes = reinterpret_cast<const uint4*>(w.codes) + static_cast<int64_t>(b) * k_tiles * V * 32 + lane;
  const int64_t group_stride = w.n_blocks * 8;
  const uint4* sc = reinterpret_cast<const uint4*>(w.scales) + b * 8 + g;
  const uint4* zc = ZP ? reinterpret_cast<const uint4*>(w.zeros) + b * 8 + g : nullptr;
  const uint4 zconst = make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
  const uint64_t policy = evict_first_policy();

  const uint16_t* xp[MT];
  bool xvalid[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int row = m0 + mt * 8 + g;
    xvalid[mt] = row < M;
    xp[mt] = x + static_cast<int64_t>(xvalid[mt] ? row : 0) * ldx + 4 * t;
  }

  float acc[4][MT][4];
  zero_block_acc<MT>(acc);

  struct Stage {
    uint4 w[V];
    uint4 s, z;
    uint2 x[MT];
  };
  Stage st[kDepth];

  auto load = [&](Stage& S, int64_t kt) {
    if (kt < ke) {
#pragma unroll
      for (int v = 0; v < V; ++v) S.w[v] = ld_stream(codes + (kt * V + v) * 32, policy);
      const int64_t grp = static_cast<int64_t>((static_cast<uint64_t>(kt) * group_magic) >> 32);
      S.s = __ldg(sc + grp * group_stride);
      if constexpr (ZP) S.z = __ldg(zc + grp * group_stride);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        S.x[mt] = xvalid[mt] ? __ldg(reinterpret_cast<const uint2*>(xp[mt] + kt * 16)) : make_uint2(0u, 0u);
    }
  };
  auto compute = [&](const Stage& S) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a[4];
      dequant_block_tile<BITS, BF16>(S.w, S.s, ZP ? S.z : zconst, j, a);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma16816<BF16>(acc[j][mt], a, S.x[mt].x, S.x[mt].y);
    }
  };

#pragma unroll
  for (int i = 0; i < kDepth; ++i) load(st[i], kb + i);
  for (int64_t kt = kb; kt < ke; kt += kDepth) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      if (kt + i < ke) {
        const Stage cur = st[i];
        load(st[i], kt + i + kDepth);
        compute(cur);
      }
    }
  }

  __syncthreads();  // red zeroed
  atomic_add_block_acc<MT>(red, acc, m0, M, g, t);
  __syncthreads();

  const int64_t n0 = static_cast<int64_t>(b) * 64;
  if (splits == 1) {
    for (int i = threadIdx.x; i < TM * 64; i += kWarps * 32) {
      const int ml = i >> 6, nl = i & 63;
      const int64_t n = n0 + nl;
      if (m0 + ml < M && n < w.N) {
        float v = red[i];
        if (bias) v += bias[n];
        y[static_cast<int64_t>(m0 + ml) * w.N + n] = to_bits(v, BF16);
      }
    }
    return;
  }
  const int64_t tile_index = static_cast<int64_t>(b) * gridDim.x + mi;
  const int64_t tile_count = static_cast<int64_t>(gridDim.x) * gridDim.y;
  float* mine = ws + (static_cast<int64_t>(s) * tile_count + tile_index) * (TM * 64);
  for (int i = threadIdx.x; i < TM * 64; i += kWarps * 32) __stcg(mine + i, red[i]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(counters + tile_index, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  constexpr int kPer = (TM * 64 + kWarps * 32 - 1) / (kWarps * 32);
  float v[kPer];  // element threadIdx.x + r * kWarps * 32 of the tile
  sum_partial_slots(ws + tile_index * (TM * 64), tile_count * (TM * 64), splits, threadIdx.x, kWarps * 32, TM * 64, v);
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int i = threadIdx.x + r * kWarps * 32;
    const int ml = i >> 6, nl = i & 63;
    const int64_t n = n0 + nl;
    if (i < TM * 64 && m0 + ml < M && n < w.N) {
      float out = v[r];
      if (bias) out += bias[n];
      y[static_cast<int64_t>(m0 + ml) * w.N + n] = to_bits(out, BF16);
    }
  }
  if (threadIdx.x == 0) counters[tile_index] = 0u;
}

__global__ void gather_kernel(const uint16_t* __restrict__ x, int64_t M, int64_t K, const int32_t* __restrict__ rs,
                              int64_t rows, uint16_t* __restrict__ xg) {
  const int64_t total = M * rows;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / rows;
    const int32_t r = rs[i - m * rows];
    xg[i] = r >= 0 ? x[m * K + r] : uint16_t{0};
  }
}

// One block: 4 k-tiles (64 packed rows) x one 64-column block, transposed through shared memory so
// every output row segment is written as 128 contiguous bytes.
template <int BITS, bool BF16, bool ZP>
__global__ void __launch_bounds__(128) dequant_kernel(const Wna16FastArgs w, uint16_t* __restrict__ out) {
  constexpr int V = BITS / 4;
  __shared__ __align__(16) uint16_t tile[64][64 + 8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t b = blockIdx.y;
  const int64_t kt = static_cast<int64_t>(blockIdx.x) * 4 + warp;
  if (kt < w.k_tiles) {
    const uint4* codes = reinterpret_cast<const uint4*>(w.codes) + (b * w.k_tiles + kt) * V * 32 + lane;
    uint4 wv[V];
#pragma unroll
    for (int v = 0; v < V; ++v) wv[v] = __ldg(codes + v * 32);
    const int64_t grp = kt / w.tiles_per_group;
    const int64_t pi = (grp * w.n_blocks + b) * 8 + g;
    const uint4 sv = __ldg(reinterpret_cast<const uint4*>(w.scales) + pi);
    const uint4 zv = ZP ? __ldg(reinterpret_cast<const uint4*>(w.zeros) + pi)
                        : make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a[4];
      dequant_block_tile<BITS, BF16>(wv, sv, zv, j, a);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int r = warp * 16 + 4 * t + 2 * (p >> 1), c = 16 * j + g + 8 * (p & 1);
        tile[r][c] = static_cast<uint16_t>(a[p] & 0xFFFFu);
        tile[r + 1][c] = static_cast<uint16_t>(a[p] >> 16);
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 64 * 8; i += 128) {
    const int r = i >> 3, v = i & 7;
    const int64_t j = static_cast<int64_t>(blockIdx.x) * 64 + r;
    if (j >= w.rows) continue;
    const int32_t src = w.row_source[j];
    if (src < 0) continue;
    *reinterpret_cast<uint4*>(out + src * w.N_pad + b * 64 + v * 8) = *reinterpret_cast<const uint4*>(&tile[r][v * 8]);
  }
}

template <int BITS, bool BF16, int MT, bool ZP>
cudaError_t gemm_launch(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                        unsigned* counters, const float* bias, void* y, cudaStream_t stream) {
  const int64_t m_tiles = (M + 8 * MT - 1) / (8 * MT);
  const int64_t tps = (w.k_tiles + splits - 1) / splits;
  const int64_t d = w.tiles_per_group;
  const uint64_t magic = ((uint64_t{1} << 32) + d - 1) / d;
  dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(w.n_blocks), static_cast<unsigned>(splits));
  gemm_kernel<BITS, BF16, MT, ZP><<<grid, kWarps * 32, 0, stream>>>(
      w, static_cast<const uint16_t*>(x), ldx, static_cast<int>(M), static_cast<int>(tps), splits, magic, ws, counters,
      bias, static_cast<uint16_t*>(y));
  return cudaGetLastError();
}

template <int BITS, bool BF16, int MT, bool ZP>
int occupancy_of() {
  static int cached = 0;
  if (cached == 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm_kernel<BITS, BF16, MT, ZP>, kWarps * 32, 0) !=
        cudaSuccess)
      n = 1;
    cached = n < 1 ? 1 : n;
  }
  return cached;
}

}  // namespace

int wna16_fast_occupancy(int bits, bool bf16, int mt, bool zp) {
  return wna16_dispatch<1, 2, 4>(
      bits, bf16, mt, zp,
      [](auto v) {
        using V = decltype(v);
        if constexpr (V::kBits == 8) return occupancy_of<V::kBits, V::kBf16, V::kMt, V::kZp>();
        return 0;  // 4-bit codes run wna16_gemv4_kernels.cu
      },
      0);
}

cudaError_t launch_wna16_fast_gather(const void* x, int64_t M, int64_t K, const int32_t* row_source, int64_t rows,
                                     void* xg, cudaStream_t stream) {
  const int64_t total = M * rows;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 4096);
  gather_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(static_cast<const uint16_t*>(x), M, K,
                                                                       row_source, rows, static_cast<uint16_t*>(xg));
  return cudaGetLastError();
}

cudaError_t launch_wna16_fast_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int splits, float* ws,
                                   unsigned* counters, const float* bias, void* y, cudaStream_t stream) {
  return wna16_dispatch<1, 2, 4>(
      w.bits, w.bf16, wna16_fast_mt(M), w.zeros != nullptr,
      [&](auto v) {
        using V = decltype(v);
        if constexpr (V::kBits == 8)
          return gemm_launch<V::kBits, V::kBf16, V::kMt, V::kZp>(w, x, ldx, M, splits, ws, counters, bias, y, stream);
        return cudaErrorInvalidValue;  // 4-bit codes run wna16_gemv4_kernels.cu
      },
      cudaErrorInvalidValue);
}

cudaError_t launch_wna16_fast_dequant(const Wna16FastArgs& w, void* out, cudaStream_t stream) {
  dim3 grid(static_cast<unsigned>((w.k_tiles + 3) / 4), static_cast<unsigned>(w.n_blocks));
  auto* o = static_cast<uint16_t*>(out);
  const bool zp = w.zeros != nullptr;
  if (w.bits == 4 && w.bf16 && zp)
    dequant_kernel<4, true, true><<<grid, 128, 0, stream>>>(w, o);
  else if (w.bits == 4 && w.bf16)
    dequant_kernel<4, true, false><<<grid, 128, 0, stream>>>(w, o);
  else if (w.bits == 4 && zp)
    dequant_kernel<4, false, true><<<grid, 128, 0, stream>>>(w, o);
  else if (w.bits == 4)
    dequant_kernel<4, false, false><<<grid, 128, 0, stream>>>(w, o);
  else if (w.bf16 && zp)
    dequant_kernel<8, true, true><<<grid, 128, 0, stream>>>(w, o);
  else if (w.bf16)
    dequant_kernel<8, true, false><<<grid, 128, 0, stream>>>(w, o);
  else if (zp)
    dequant_kernel<8, false, true><<<grid, 128, 0, stream>>>(w, o);
  else
    dequant_kernel<8, false, false><<<grid, 128, 0, stream>>>(w, o);
  return cudaGetLastError();
}

}  // namespace qlm::cuda
