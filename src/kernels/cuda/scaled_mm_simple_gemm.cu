#include <type_traits>

#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/act_quant_device.cuh"
#include "kernels/cuda/scaled_mm_simple_gemm.h"

namespace qlm::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;

enum Mode : int { kIntCodes = 0, kFloatCodes = 1, kFloatActs = 2 };

__device__ __forceinline__ float weight_scale(const SimpleMMArgs& a, int64_t n, int64_t k) {
  switch (a.w_scale_kind) {
    case kWeightTensor: return a.w_scales[0];
    case kWeightChannel: return a.w_scales[n];
    default: return a.w_scales[n * a.w_scale_cols + (k + a.w_phase) / a.w_block_k];
  }
}

__device__ __forceinline__ float weight_value(const SimpleMMArgs& a, int64_t n, int64_t k) {
  const int64_t i = n * a.K + k;
  const float code = a.fp8 ? e4m3_to_f32(static_cast<const uint8_t*>(a.w_codes)[i])
                           : static_cast<float>(static_cast<const int8_t*>(a.w_codes)[i]);
  return __fmul_rn(code, weight_scale(a, n, k));
}

template <int kMode, typename T>
__device__ __forceinline__ float act_value(const SimpleMMArgs& a, int64_t m, int64_t k) {
  if constexpr (kMode == kFloatActs) {
    return load_float(static_cast<const T*>(a.x), m * a.K + k);
  } else {
    const float code = e4m3_to_f32(static_cast<const uint8_t*>(a.act_codes)[m * a.K + k]);
    return __fmul_rn(code, a.act_scales[m * a.act_groups + (k + a.act_phase) / a.act_group]);
  }
}

// Acc is int32 for kIntCodes, float otherwise. T is the activation / output type.
template <int kMode, typename T>
__global__ void __launch_bounds__(kThreads) simple_mm_kernel(SimpleMMArgs a) {
  using Acc = typename std::conditional<kMode == kIntCodes, int32_t, float>::type;
  __shared__ Acc As[kBK][kBM + 1];
  __shared__ Acc Bs[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t{blockIdx.y} * kBM, n0 = int64_t{blockIdx.x} * kBN;
  Acc acc[4][4] = {};
  for (int64_t k0 = 0; k0 < a.K; k0 += kBK) {
#pragma unroll
    for (int i = 0; i < kBM * kBK / kThreads; ++i) {
      const int idx = tid + i * kThreads, row = idx / kBK, kk = idx % kBK;
      const int64_t k = k0 + kk, m = m0 + row, n = n0 + row;
      Acc av = 0, bv = 0;
      if constexpr (kMode == kIntCodes) {
        if (m < a.M && k < a.K)
          av = int32_t{static_cast<const int8_t*>(a.act_codes)[m * a.K + k]} - (a.act_zeros ? a.act_zeros[m] : 0);
        if (n < a.N && k < a.K) bv = static_cast<const int8_t*>(a.w_codes)[n * a.K + k];
      } else {
        if (m < a.M && k < a.K) av = act_value<kMode, T>(a, m, k);
        if (n < a.N && k < a.K) bv = weight_value(a, n, k);
      }
      As[kk][row] = av;
      Bs[kk][row] = bv;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      Acc av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m >= a.M || n >= a.N) continue;
      float out;
      if constexpr (kMode == kIntCodes) {  // exactly cpu_ref's (s_x * s_w) * acc + bias in double
        double v = __dmul_rn(__dmul_rn(static_cast<double>(a.act_scales[m]), static_cast<double>(weight_scale(a, n, 0))),
                             static_cast<double>(acc[i][j]));
        if (a.bias) v = __dadd_rn(v, static_cast<double>(a.bias[n]));
        out = static_cast<float>(v);
      } else {
        out = a.bias ? __fadd_rn(acc[i][j], a.bias[n]) : acc[i][j];
      }
      store_float(static_cast<T*>(a.y), m * a.N + n, out);
    }
}

template <typename T>
cudaError_t launch_typed(const SimpleMMArgs& a, dim3 grid, cudaStream_t s) {
  if (!a.act_codes) simple_mm_kernel<kFloatActs, T><<<grid, kThreads, 0, s>>>(a);
  else if (a.fp8) simple_mm_kernel<kFloatCodes, T><<<grid, kThreads, 0, s>>>(a);
  else simple_mm_kernel<kIntCodes, T><<<grid, kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_scaled_mm_simple(const SimpleMMArgs& a, cudaStream_t stream) {
  if (a.M <= 0 || a.N <= 0) return cudaSuccess;
  const int64_t gy = (a.M + kBM - 1) / kBM;
  if (gy > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((a.N + kBN - 1) / kBN), static_cast<unsigned>(gy));
  switch (a.act_type) {
    case kF32: return launch_typed<float>(a, grid, stream);
    case kF16: return launch_typed<__half>(a, grid, stream);
    case kBF16: return launch_typed<__nv_bfloat16>(a, grid, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace qlm::cuda
