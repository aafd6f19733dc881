#include <type_traits>

#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/act_quant_device.cuh"
#include "kernels/cuda/scaled_mm_epilogue.h"

namespace qlm::cuda {
namespace {

template <typename A>
__device__ __forceinline__ float load_acc(const A* p, int64_t i) {
  return load_float(p, i);
}

template <typename A, typename Y>
__global__ void epilogue_kernel(EpilogueArgs a) {
  const int64_t total = a.M * a.N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / a.N, n = i - m * a.N;
    const float sr = a.row_scale ? a.row_scale[m * a.row_scale_stride] : 1.0f;
    const float sc = a.col_scale ? a.col_scale[n * a.col_scale_stride] : 1.0f;
    float out;
    if constexpr (std::is_same<A, int32_t>::value) {
      int64_t acc = static_cast<const int32_t*>(a.acc)[i];
      if (a.row_zero) acc -= int64_t{a.row_zero[m]} * a.col_sum[n];
      double v = __dmul_rn(__dmul_rn(static_cast<double>(sr), static_cast<double>(sc)), static_cast<double>(acc));
      if (a.bias) v = __dadd_rn(v, static_cast<double>(a.bias[n]));
      out = static_cast<float>(v);
    } else {
      out = __fmul_rn(__fmul_rn(load_acc(static_cast<const A*>(a.acc), i), sr), sc);
      if (a.bias) out = __fadd_rn(out, a.bias[n]);
    }
    store_float(static_cast<Y*>(a.y), i, out);
  }
}

template <typename A>
cudaError_t launch_acc(const EpilogueArgs& a, unsigned blocks, cudaStream_t s) {
  switch (a.y_type) {
    case kF32: epilogue_kernel<A, float><<<blocks, 256, 0, s>>>(a); break;
    case kF16: epilogue_kernel<A, __half><<<blocks, 256, 0, s>>>(a); break;
    case kBF16: epilogue_kernel<A, __nv_bfloat16><<<blocks, 256, 0, s>>>(a); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_epilogue(const EpilogueArgs& a, cudaStream_t stream) {
  const int64_t total = a.M * a.N;
  if (total <= 0) return cudaSuccess;
  const int64_t want = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  switch (a.acc_type) {
    case kAccF32: return launch_acc<float>(a, blocks, stream);
    case kAccF16: return launch_acc<__half>(a, blocks, stream);
    case kAccBF16: return launch_acc<__nv_bfloat16>(a, blocks, stream);
    case kAccI32: return launch_acc<int32_t>(a, blocks, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace qlm::cuda
