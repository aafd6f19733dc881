// Kernels of cuda_scaled_mm_fp8_fast (see scaled_mm_fp8_fast_kernels.h).
#include <cuda_fp8.h>

#include <type_traits>

#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/act_quant_device.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"

namespace qlm::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kWarps = kThreads / 32;
static_assert(kWarps * 16 == kFp8FastRowsPerBlock, "16 weight rows per warp");
constexpr int kSmemBudget = 40960;  // bytes of staged activation codes per block (static limit 48 KB)
constexpr int kRowPad = 64;         // row stride = chunk + 64: rows g and g+1 fall in opposite bank halves

// ---- activation quantizer (dynamic per token) ----

constexpr float kE4M3Max = 448.0f;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The per-token scale from a row's absmax: the formulas and IEEE operations of act_quant.cu's
// per-token FP8 path.
__device__ __forceinline__ float token_scale(float absmax) {
  return fmaxf(__fdiv_rn(absmax, kE4M3Max), __fdiv_rn(1.0f, kE4M3Max * 512.0f));
}
// Four clamped values to e4m3 codes, the first in the low byte: on sm_89+ the hardware conversion
// (round to nearest even with saturation: the codes of f32_to_e4m3 for every value, tested on every
// rounding case; a NaN, which the scaling product has made the canonical positive NaN, gives 0x7F
// either way).
__device__ __forceinline__ uint32_t e4m3x4(const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[0], v[1]), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[2], v[3]), __NV_SATFINITE, __NV_E4M3);
  return lo | hi << 16;
#else
  uint32_t codes = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) codes |= uint32_t{f32_to_e4m3(v[i])} << (8 * i);
  return codes;
#endif
}

__device__ __forceinline__ uint2 quantize8(const float (&f)[8], float inv) {
  float lo[4], hi[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo[i] = clamp_like_std(__fmul_rn(f[i], inv), -kE4M3Max, kE4M3Max);
    hi[i] = clamp_like_std(__fmul_rn(f[i + 4], inv), -kE4M3Max, kE4M3Max);
  }
  return make_uint2(e4m3x4(lo), e4m3x4(hi));
}

// 8 values to symmetric INT8 codes (int8_code with zero point 0), the first in the low byte.
__device__ __forceinline__ uint2 quantize8_int8(const float (&f)[8], float inv) {
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i / 4] |= (static_cast<uint32_t>(int8_code(f[i], inv, 0)) & 0xffu) << (8 * (i % 4));
  return make_uint2(w[0], w[1]);
}

// A row's scale from its absmax and, in `inv`, the reciprocal the codes are made with: FP8 as token_scale, INT8 as
// act_quant.cu's symmetric per-token path (int8_symmetric_scale).
template <bool kInt8>
__device__ __forceinline__ float row_scale(float absmax, float& inv) {
  if constexpr (kInt8) {
    return int8_symmetric_scale(absmax, inv);
  } else {
    const float scale = token_scale(absmax);
    inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
    return scale;
  }
}
template <bool kInt8>
__device__ __forceinline__ uint2 encode8(const float (&f)[8], float inv) {
  if constexpr (kInt8) return quantize8_int8(f, inv);
  else return quantize8(f, inv);
}

// The absmax of the block's threads (every thread gets it).
__device__ __forceinline__ float block_max(float m) {
  __shared__ float sh[kWarps];
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = m;
  __syncthreads();
  float am = 0;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) am = fmaxf(am, sh[i]);
  return am;
}

// 8 elements of T as loaded (16 or 32 bytes, kept in registers) and widened exactly to f32.
template <typename T>
struct Packed8 {
  uint4 u;
  __device__ __forceinline__ void load(const T* p) { u = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ void widen(float (&f)[8]) const {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
      } else {
        f[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
        f[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
      }
    }
  }
};
template <>
struct Packed8<float> {
  float4 a, b;
  __device__ __forceinline__ void load(const float* p) {
    a = reinterpret_cast<const float4*>(p)[0];
    b = reinterpret_cast<const float4*>(p)[1];
  }
  __device__ __forceinline__ void widen(float (&f)[8]) const {
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  }
};

// One row per block, read from memory once: every thread issues all its VPT 8-element loads up
// front and keeps them (packed) in registers through the absmax, then quantizes them. For rows of
// up to VPT * 8 * kThreads elements; longer rows take quant_token_kernel.
template <typename T, int VPT, bool kInt8>
__global__ void __launch_bounds__(kThreads)
    quant_token_regs_kernel(const T* x, int64_t K, uint8_t* codes, float* scales) {
  // x may be the previous kernel's output and the codes its input: wait for it (launched with PDL: its tail overlaps
  // this launch), then let the GEMM start streaming weights (it waits before reading the codes).
  pdl_enter();
  const int64_t r = blockIdx.x;
  const T* xr = x + r * K;
  const int nv = static_cast<int>(K / 8);
  Packed8<T> raw[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = static_cast<int>(threadIdx.x) + i * kThreads;
    if (v < nv) raw[i].load(xr + v * 8);
  }
  float m = 0;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    if (static_cast<int>(threadIdx.x) + i * kThreads < nv) {
      float f[8];
      raw[i].widen(f);
#pragma unroll
      for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(f[j]));
    }
  }
  float inv;
  const float scale = row_scale<kInt8>(block_max(m), inv);
  uint8_t* qr = codes + r * K;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = static_cast<int>(threadIdx.x) + i * kThreads;
    if (v < nv) {
      float f[8];
      raw[i].widen(f);
      *reinterpret_cast<uint2*>(qr + v * 8) = encode8<kInt8>(f, inv);
    }
  }
  if (threadIdx.x == 0) scales[r] = scale;
}

// Rows of any length: the row is read twice (absmax, then codes). fmaxf ignores NaN in any order,
// so the absmax does not depend on the reduction order.
template <typename T, bool kInt8>
__global__ void __launch_bounds__(kThreads) quant_token_kernel(const T* x, int64_t K, uint8_t* codes, float* scales) {
  pdl_enter();  // as quant_token_regs_kernel
  const int64_t r = blockIdx.x;
  const T* xr = x + r * K;
  const int64_t nv = K / 8;
  float m = 0;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    Packed8<T> p;
    p.load(xr + v * 8);
    float f[8];
    p.widen(f);
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
  }
  float inv;
  const float scale = row_scale<kInt8>(block_max(m), inv);
  uint8_t* qr = codes + r * K;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    Packed8<T> p;
    p.load(xr + v * 8);
    float f[8];
    p.widen(f);
    *reinterpret_cast<uint2*>(qr + v * 8) = encode8<kInt8>(f, inv);
  }
  if (threadIdx.x == 0) scales[r] = scale;
}

// ---- weight-streaming GEMM ----

// Streamed once: bypass L1, and have L2 fetch the rest of the 256-byte row segment at once.
__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // the host never launches this below capability 8.9
#endif
}

__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // the host never launches this below capability 8.0
#endif
}

template <typename T>
__device__ __forceinline__ void store_out(void* y, int64_t i, float v) {
  store_float(static_cast<T*>(y), i, v);
}

// y[m, n] = sum * (s_x * s_w[n]) (+ bias[n]) in the output type: the one epilogue of both paths (one K slice, the
// reduction kernel of a split), so they give the same bits.
template <typename T>
__device__ __forceinline__ void store_scaled(const Fp8FastGemmArgs& a, int64_t i, int64_t n, float sum, float sx) {
  float v = sum * (sx * a.sw[n * a.sw_stride]);
  if (a.bias) v += a.bias[n];
  store_out<T>(a.y, i, v);
}

int chunk_columns(int rows, int64_t k_slice) {
  int64_t kc = (kSmemBudget / rows - kRowPad) / kFp8FastStepK * kFp8FastStepK;
  if (kc < kFp8FastStepK) kc = kFp8FastStepK;
  return static_cast<int>(kc < k_slice ? kc : k_slice);
}

// The per-token scales of rows [0, M) of x [M, K] (M <= kFp8FastFusedQuantMaxTokens) by the whole block, as
// quant_token_regs_kernel / quant_token_kernel (FP8) or act_quant.cu (symmetric INT8) compute them (fmaxf: the same
// absmax in any order): scale[m] and inv[m] (the reciprocal scale, 0 for an all-zero row) in shared memory for
// every thread.
template <typename T, bool kInt8>
__device__ __forceinline__ void token_scales(const T* x, int64_t M, int64_t K, float* scale, float* inv) {
  __shared__ float part[kFp8FastFusedQuantMaxTokens][kWarps];
  float am[kFp8FastFusedQuantMaxTokens] = {};
  const int64_t nv = K / 8;
#pragma unroll
  for (int m = 0; m < kFp8FastFusedQuantMaxTokens; ++m) {
    if (m >= M) break;
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < nv; v += kThreads) {
      Packed8<T> p;
      p.load(x + m * K + v * 8);
      float f[8];
      p.widen(f);
#pragma unroll
      for (int j = 0; j < 8; ++j) am[m] = fmaxf(am[m], fabsf(f[j]));
    }
  }
#pragma unroll
  for (int m = 0; m < kFp8FastFusedQuantMaxTokens; ++m) {
    const float w = warp_max(am[m]);
    if ((threadIdx.x & 31) == 0) part[m][threadIdx.x >> 5] = w;
  }
  __syncthreads();
  if (threadIdx.x < M) {
    float r = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) r = fmaxf(r, part[threadIdx.x][i]);
    if constexpr (kInt8) {  // int8_symmetric_scale's arithmetic, written out: calling it reschedules this kernel
      scale[threadIdx.x] = __fdiv_rn(r, 127.0f);
      inv[threadIdx.x] = r > 0 ? __fdiv_rn(127.0f, r) : 0.0f;
    } else {
      const float sc = token_scale(r);
      scale[threadIdx.x] = sc;
      inv[threadIdx.x] = sc > 0 ? __fdiv_rn(1.0f, sc) : 0.0f;
    }
  }
  __syncthreads();
}

// Lane (g = lane / 4, t = lane % 4) of a warp owns weight rows n0 + g and n0 + g + 8. For each
// 128-column half h of a 256-column step starting at k, and q in {0, 1}, it loads the 16 bytes at
// column k + 128 h + 64 q + 16 t of both rows, and of each token row (from shared memory). The
// 16 bytes are 4 registers; registers {0, 1} feed one MMA and {2, 3} another: in both operands a
// lane's register i of an MMA holds the lane's logical k = 4 t + 16 i .. +3, so A (weights, rows g
// and g + 8) and B (tokens g) see the same permutation of k and the products pair up correctly.
template <int MT, typename T, bool kQuant, bool kInt8>
__global__ void __launch_bounds__(kThreads) fp8_fast_gemm_kernel(Fp8FastGemmArgs a, int kc) {
  using Acc = std::conditional_t<kInt8, int, float>;  // INT8: exact int32 sums (|code| <= 128, K <= 131072)
  static_assert(!kQuant || MT * 8 >= kFp8FastFusedQuantMaxTokens, "fused quantization within one token tile");
  extern __shared__ uint4 smem[];
  __shared__ float s_scale[kQuant ? kFp8FastFusedQuantMaxTokens : 1], s_inv[kQuant ? kFp8FastFusedQuantMaxTokens : 1];
  uint8_t* xs = reinterpret_cast<uint8_t*>(smem);
  constexpr int kRows = MT * 8;
  const int ld = kc + kRowPad;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t K = a.K, N = a.N;
  const int64_t n0 = int64_t{blockIdx.x} * kFp8FastRowsPerBlock + warp * 16;
  const bool active = n0 < N;  // N is a multiple of 16: a warp is wholly in or out
  const int64_t kbeg = int64_t{blockIdx.y} * a.k_slice;
  const int64_t kend = kbeg + a.k_slice < K ? kbeg + a.k_slice : K;
  const int64_t nsteps = (kend - kbeg) / kFp8FastStepK;
  const uint8_t* wg = a.w + (active ? (n0 + g) * K : 0) + 16 * t;
  const uint8_t* wg8 = wg + (active ? 8 * K : 0);

  Acc acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;

  // [h][q][row]: h = 128-column half, q = 64-column quarter pair, row = g / g + 8.
  uint4 wc[2][2][2], wn[2][2][2];
  auto load_w = [&](uint4(&r)[2][2][2], int64_t k) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        r[h][q][0] = load_stream(wg + k + 128 * h + 64 * q);
        r[h][q][1] = load_stream(wg8 + k + 128 * h + 64 * q);
      }
  };
  if (active && nsteps > 0) load_w(wc, kbeg);
  wait_for_predecessor();  // the activation codes and scales are the quantizer's output (or x, the previous kernel's)
  const T* x = static_cast<const T*>(a.x);
  // Token m's activation scale: the block's own when it quantizes, else the quantizer's.
  const auto token_scale_of = [&](int64_t m) {
    if constexpr (kQuant)
      return s_scale[m];
    else
      return a.sx[m];
  };
  if constexpr (kQuant) {
    token_scales<T, kInt8>(x, a.M, K, s_scale, s_inv);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x < a.M) a.sx_out[threadIdx.x] = s_scale[threadIdx.x];
  }

  int64_t c0 = kbeg, c1 = kbeg;
  for (int64_t s = 0; s < nsteps; ++s) {
    const int64_t k = kbeg + s * kFp8FastStepK;
    if (k >= c1) {  // stage the next chunk of activation codes (rows >= M are zero)
      __syncthreads();
      c0 = k;
      c1 = k + kc < kend ? k + kc : kend;
      const int per_row = static_cast<int>((c1 - c0) / 16);
      for (int i = threadIdx.x; i < kRows * per_row; i += kThreads) {
        const int row = i / per_row, col = i - row * per_row;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row < a.M) {
          if constexpr (kQuant) {  // 16 elements to 16 codes, as quant_token_regs_kernel encodes them
            const T* src = x + row * K + c0 + col * 16;
            float f[8];
            Packed8<T> p;
            p.load(src);
            p.widen(f);
            const uint2 lo = kInt8 ? quantize8_int8(f, s_inv[row]) : quantize8(f, s_inv[row]);
            p.load(src + 8);
            p.widen(f);
            const uint2 hi = kInt8 ? quantize8_int8(f, s_inv[row]) : quantize8(f, s_inv[row]);
            v = make_uint4(lo.x, lo.y, hi.x, hi.y);
          } else {
            v = *reinterpret_cast<const uint4*>(a.xq + row * K + c0 + col * 16);
          }
        }
        *reinterpret_cast<uint4*>(xs + row * ld + col * 16) = v;
      }
      __syncthreads();
    }
    if (active) {
      if (s + 1 < nsteps) load_w(wn, k + kFp8FastStepK);
      const uint8_t* xb = xs + g * ld + (k - c0) + 16 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const uint4 A = wc[h][q][0], A8 = wc[h][q][1];
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const uint4 B = *reinterpret_cast<const uint4*>(xb + j * 8 * ld + 128 * h + 64 * q);
            if constexpr (kInt8) {
              mma_s8(acc[j], A.x, A8.x, A.y, A8.y, B.x, B.y);
              mma_s8(acc[j], A.z, A8.z, A.w, A8.w, B.z, B.w);
            } else {
              mma_e4m3(acc[j], A.x, A8.x, A.y, A8.y, B.x, B.y);
              mma_e4m3(acc[j], A.z, A8.z, A.w, A8.w, B.z, B.w);
            }
          }
        }
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          wc[h][q][0] = wn[h][q][0];
          wc[h][q][1] = wn[h][q][1];
        }
    }
  }
  // acc[j]: {row g, token 2t}, {row g, token 2t+1}, {row g+8, token 2t}, {row g+8, token 2t+1}.
  if (active) {
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t m = j * 8 + 2 * t + (e & 1);
        const int64_t n = n0 + g + (e >> 1) * 8;
        if (m >= a.M) continue;
        if (a.splits > 1) {
          a.partial[(int64_t{blockIdx.y} * a.M + m) * N + n] = static_cast<float>(acc[j][e]);
        } else {
          store_scaled<T>(a, m * N + n, n, static_cast<float>(acc[j][e]), token_scale_of(m));
        }
      }
  }
}

// y[m, n] = (sum over splits of partial) * s_x[m] * s_w[n] (+ bias): 4 columns per thread.
template <typename T>
__global__ void fp8_fast_reduce_kernel(Fp8FastGemmArgs a) {
  wait_for_predecessor();
  const int64_t quads = a.M * a.N / 4;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < quads; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i * 4, m = e / a.N, n = e - m * a.N;
    float4 s = *reinterpret_cast<const float4*>(a.partial + e);
    for (int p = 1; p < a.splits; ++p) {
      const float4 v = *reinterpret_cast<const float4*>(a.partial + p * a.M * a.N + e);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    const float sx = a.sx[m];
    const float r[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) store_scaled<T>(a, e + c, n + c, r[c], sx);
  }
}

template <int MT, bool kInt8>
const void* gemm_kernel_ptr() {
  return reinterpret_cast<const void*>(&fp8_fast_gemm_kernel<MT, __nv_bfloat16, false, kInt8>);
}

template <int MT, typename T, bool kQuant, bool kInt8>
cudaError_t launch_mt(Fp8FastGemmArgs a, cudaStream_t stream) {
  const int kc = chunk_columns(MT * 8, a.k_slice);
  const size_t smem = static_cast<size_t>(MT * 8) * (kc + kRowPad);
  const dim3 grid(static_cast<unsigned>((a.N + kFp8FastRowsPerBlock - 1) / kFp8FastRowsPerBlock),
                  static_cast<unsigned>(a.splits));
  cudaError_t e =
      launch_pdl_if(a.pdl, fp8_fast_gemm_kernel<MT, T, kQuant, kInt8>, grid, dim3(kThreads), smem, stream, a, kc);
  if (e != cudaSuccess) return e;
  if ((e = cudaGetLastError()) != cudaSuccess || a.splits <= 1) return e;
  if (kQuant) a.sx = a.sx_out;  // block (0, 0) wrote them; the reduction waits for the whole GEMM
  const int64_t quads = a.M * a.N / 4;
  const int64_t want = (quads + 255) / 256;
  e = launch_pdl_if(a.pdl, fp8_fast_reduce_kernel<T>, dim3(static_cast<unsigned>(want < 4096 ? want : 4096)), dim3(256),
                    0, stream, a);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <typename T, bool kInt8>
cudaError_t launch_typed(const Fp8FastGemmArgs& a, cudaStream_t stream) {
  if (a.x != nullptr) return launch_mt<1, T, true, kInt8>(a, stream);  // M <= kFp8FastFusedQuantMaxTokens (checked)
  switch (fp8_fast_tile_tokens(a.M)) {
    case 8: return launch_mt<1, T, false, kInt8>(a, stream);
    case 16: return launch_mt<2, T, false, kInt8>(a, stream);
    case 32: return launch_mt<4, T, false, kInt8>(a, stream);
    case 64: return launch_mt<8, T, false, kInt8>(a, stream);
  }
  return cudaErrorInvalidValue;
}

template <bool kInt8>
cudaError_t launch_codes(const Fp8FastGemmArgs& a, cudaStream_t stream) {
  switch (a.y_type) {
    case kF32: return launch_typed<float, kInt8>(a, stream);
    case kF16: return launch_typed<__half, kInt8>(a, stream);
    case kBF16: return launch_typed<__nv_bfloat16, kInt8>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int fp8_fast_tile_tokens(int64_t M) { return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64; }

cudaError_t fp8_fast_occupancy(int tile_tokens, bool int8, int* blocks_per_sm) {
  const void* f = nullptr;
  switch (tile_tokens) {
    case 8: f = int8 ? gemm_kernel_ptr<1, true>() : gemm_kernel_ptr<1, false>(); break;
    case 16: f = int8 ? gemm_kernel_ptr<2, true>() : gemm_kernel_ptr<2, false>(); break;
    case 32: f = int8 ? gemm_kernel_ptr<4, true>() : gemm_kernel_ptr<4, false>(); break;
    case 64: f = int8 ? gemm_kernel_ptr<8, true>() : gemm_kernel_ptr<8, false>(); break;
    default: return cudaErrorInvalidValue;
  }
  // The largest chunk an instance stages (a K slice of at least one chunk).
  const size_t smem = static_cast<size_t>(tile_tokens) * (chunk_columns(tile_tokens, int64_t{1} << 40) + kRowPad);
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, f, kThreads, smem);
}

cudaError_t launch_fp8_fast_gemm(const Fp8FastGemmArgs& a, cudaStream_t stream) {
  if (a.M <= 0) return cudaSuccess;
  if (a.M > kFp8FastMaxTokens || a.K % kFp8FastStepK != 0 || a.N % 16 != 0 || a.k_slice % kFp8FastStepK != 0 ||
      a.k_slice <= 0 || a.splits < 1 || (a.splits > 1 && a.partial == nullptr))
    return cudaErrorInvalidValue;
  if (a.x != nullptr &&
      (a.M > kFp8FastFusedQuantMaxTokens || a.sx_out == nullptr || reinterpret_cast<uintptr_t>(a.x) % 16 != 0))
    return cudaErrorInvalidValue;
  return a.int8 ? launch_codes<true>(a, stream) : launch_codes<false>(a, stream);
}

cudaError_t launch_w8a8_quant_token(const void* x, int x_type, int64_t M, int64_t K, bool int8, void* codes,
                                    float* scales, bool pdl, cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (K % 8 != 0 || M > 0x7fffffff) return cudaErrorInvalidValue;
  uint8_t* q = static_cast<uint8_t*>(codes);
  const int64_t per_thread = (K / 8 + kThreads - 1) / kThreads;  // 8-element vectors per thread
  cudaError_t e = cudaSuccess;
  auto run = [&](auto type_tag, auto int8_tag) {
    using T = decltype(type_tag);
    constexpr bool kInt8 = decltype(int8_tag)::value;
    const T* xt = static_cast<const T*>(x);
    constexpr int kMaxVpt = sizeof(T) == 4 ? 8 : 16;  // registers held per thread: 64 (raw)
    // One row per block.
    const auto go = [&](auto kernel) {
      e = launch_pdl_if(pdl, kernel, dim3(static_cast<unsigned>(M)), dim3(kThreads), 0, stream, xt, K, q, scales);
    };
    if (per_thread <= 1)
      go(quant_token_regs_kernel<T, 1, kInt8>);
    else if (per_thread <= 2)
      go(quant_token_regs_kernel<T, 2, kInt8>);
    else if (per_thread <= 4)
      go(quant_token_regs_kernel<T, 4, kInt8>);
    else if (per_thread <= 8)
      go(quant_token_regs_kernel<T, 8, kInt8>);
    else if (per_thread <= kMaxVpt)
      go(quant_token_regs_kernel<T, kMaxVpt, kInt8>);
    else
      go(quant_token_kernel<T, kInt8>);
  };
  const auto typed = [&](auto type_tag) {
    if (int8)
      run(type_tag, std::true_type{});
    else
      run(type_tag, std::false_type{});
  };
  switch (x_type) {
    case kF32: typed(float{}); break;
    case kF16: typed(__half{}); break;
    case kBF16: typed(__nv_bfloat16{}); break;
    default: return cudaErrorInvalidValue;
  }
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace qlm::cuda
