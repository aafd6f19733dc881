// Device helpers of the WNA16 layout (kernels/cuda/wna16_layout.h) shared by the `cuda_wna16`
// kernels and the grouped MoE kernel: chunk geometry, code fields, group scales and zero points,
// conversions, the GEMV's per-chunk accumulation and its block reduction. Dequantization is exact up to one rounding:
// for a code c and zero z, as_float(0x4B000000 | c) is 2^23 + c exactly, and subtracting the f32 2^23 + z (exact, as c,
// z < 256) gives c - z exactly. For .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/wna16_kernels.h"

namespace qlm::cuda::wna16 {

constexpr float kMagic = 8388608.0f;  // 2^23
constexpr uint32_t kMagicBits = 0x4B000000u;

template <int BITS>
struct Chunk {
  static constexpr int kWords = BITS == 3 ? 3 : 1;
  static constexpr int kRows = kWords * 32 / BITS;
  static_assert(kRows % 4 == 0, "chunks hold whole groups of 4 rows");
};

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(__half* p, const float (&v)[4]) {
  __half2 h[2] = {__floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3])};
  *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(h);
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float (&v)[4]) {
  __nv_bfloat162 h[2] = {__floats2bfloat162_rn(v[0], v[1]), __floats2bfloat162_rn(v[2], v[3])};
  *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(h);
}

// Field i of one column's chunk words (a little-endian bit stream; 3-bit fields straddle words).
// `i` is a compile-time constant after unrolling, so this folds to a shift and a mask.
template <int BITS, int W>
__device__ __forceinline__ uint32_t field(const uint32_t (&q)[W], int i) {
  const int bit = i * BITS;
  const int word = bit >> 5;
  const int shift = bit & 31;
  uint32_t v = q[word] >> shift;
  if (shift + BITS > 32) v |= q[word + 1 < W ? word + 1 : word] << (32 - shift);
  return v & ((1u << BITS) - 1u);
}

// Scales and magic-offset zeros (2^23 + z) of 4 columns of group g.
__device__ __forceinline__ void load_group(const Wna16DeviceWeights& w, int g, int64_t col, float (&s)[4],
                                           float (&zf)[4]) {
  const float4 sv = __ldg(reinterpret_cast<const float4*>(w.scales + g * w.N_pad + col));
  s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
  if (w.zeros) {
    const uchar4 z = __ldg(reinterpret_cast<const uchar4*>(w.zeros + g * w.N_pad + col));
    zf[0] = kMagic + z.x, zf[1] = kMagic + z.y, zf[2] = kMagic + z.z, zf[3] = kMagic + z.w;
  } else {
    zf[0] = zf[1] = zf[2] = zf[3] = kMagic + static_cast<float>(w.implied_zero);
  }
}

// One chunk of the split-K GEMV for MT token rows and one lane's 4 columns: with q[j] the chunk's
// words of column j, t[m][j] = sum_i x[m, i] * (c_ij - z_j) as exact f32 products, then
// acc[m][j] += t[m][j] * s[j]. x row m of the chunk starts at xc + m * stride (16-byte aligned);
// rows m >= nrows read as zero (pass MT to read every row).
template <int BITS, int W, int MT>
__device__ __forceinline__ void accumulate_chunk(const uint32_t (&q)[4][W], const float* xc, int64_t stride, int nrows,
                                                 const float (&s)[4], const float (&zf)[4], float (&acc)[MT][4]) {
  constexpr int R = Chunk<BITS>::kRows;
  float t[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m) t[m][0] = t[m][1] = t[m][2] = t[m][3] = 0.0f;
#pragma unroll
  for (int i = 0; i < R; i += 4) {
    float x4[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const float4 xv =
          m < nrows ? __ldg(reinterpret_cast<const float4*>(xc + m * stride + i)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      x4[m][0] = xv.x, x4[m][1] = xv.y, x4[m][2] = xv.z, x4[m][3] = xv.w;
    }
#pragma unroll
    for (int ii = 0; ii < 4; ++ii)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float d = __uint_as_float(kMagicBits | field<BITS, W>(q[j], i + ii)) - zf[j];
#pragma unroll
        for (int m = 0; m < MT; ++m) t[m][j] = fmaf(x4[m][ii], d, t[m][j]);
      }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[m][j] = fmaf(t[m][j], s[j], acc[m][j]);
}

// A lane's share of the split-K GEMV: chunks [c_begin, c_end) of its column quad (quad < quads)
// accumulated into acc for the tile rows of xt (accumulate_chunk's stride and nrows). The words of
// U chunks (4; 2 for 3-bit codes, whose chunks are larger) are loaded before any is used, so that
// many 16-byte loads per lane are in flight.
template <int BITS, int MT>
__device__ __forceinline__ void accumulate_chunks(const Wna16DeviceWeights& w, int64_t quad, int64_t quads,
                                                  int64_t c_begin, int64_t c_end, const float* xt, int64_t stride,
                                                  int nrows, float (&acc)[MT][4]) {
  constexpr int W = Chunk<BITS>::kWords;
  constexpr int R = Chunk<BITS>::kRows;
  constexpr int U = BITS == 3 ? 2 : 4;
  const uint4* codes = reinterpret_cast<const uint4*>(w.codes);
  int g_cur = -1;
  float s[4], zf[4];
  for (int64_t c0 = c_begin; c0 < c_end; c0 += U) {
    uint4 qv[U][W];
    int g[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool ok = c0 + u < c_end;
      g[u] = ok ? __ldg(w.chunk_group + c0 + u) : 0;
#pragma unroll
      for (int v = 0; v < W; ++v)
        qv[u][v] = ok ? __ldg(codes + ((c0 + u) * W + v) * quads + quad) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c0 + u >= c_end) continue;  // uniform across the block
      if (g[u] != g_cur) {
        g_cur = g[u];
        load_group(w, g_cur, quad * 4, s, zf);
      }
      uint32_t q[4][W];
#pragma unroll
      for (int v = 0; v < W; ++v)
        q[0][v] = qv[u][v].x, q[1][v] = qv[u][v].y, q[2][v] = qv[u][v].z, q[3][v] = qv[u][v].w;
      accumulate_chunk<BITS, W, MT>(q, xt + (c0 + u) * R, stride, nrows, s, zf, acc);
    }
  }
}

// The GEMV block's epilogue: the kGemvWarps warps' acc (lane L holds columns 4L..4L+3 of the
// block's kGemvColumns) summed through shared memory; store(m, col, sum) for every row m < MT and
// block column col, called by the block's threads in turn (the caller skips rows and columns out
// of range). Contains __syncthreads: every thread of the block must call it.
template <int MT, typename Store>
__device__ __forceinline__ void sum_warps(const float (&acc)[MT][4], Store store) {
  __shared__ float4 red[kGemvWarps][MT][32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < MT; ++m) red[warp][m][lane] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
  __syncthreads();
  for (int idx = threadIdx.x; idx < MT * kGemvColumns; idx += blockDim.x) {
    const int m = idx / kGemvColumns;
    const int col = idx % kGemvColumns;
    float sum = 0.0f;
#pragma unroll
    for (int wp = 0; wp < kGemvWarps; ++wp) sum += reinterpret_cast<const float*>(red[wp][m])[col];
    store(m, col, sum);
  }
}

}  // namespace qlm::cuda::wna16
