// Loads and stores of the three element types as float, for the .cu files of this folder.
// Stores round to nearest even, like core/float_convert.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "runtime/ops/cuda/launch.h"

namespace qlm::ops::cu {

template <ElemType T>
struct Elem;
template <>
struct Elem<ElemType::F32> {
  using type = float;
  static __device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(float* p, int64_t i, float x) { p[i] = x; }
};
template <>
struct Elem<ElemType::F16> {
  using type = __half;
  static __device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
  static __device__ __forceinline__ void store(__half* p, int64_t i, float x) { p[i] = __float2half_rn(x); }
};
template <>
struct Elem<ElemType::BF16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float x) { p[i] = __float2bfloat16_rn(x); }
};

template <ElemType T>
__device__ __forceinline__ float load_elem(const void* p, int64_t i) {
  return Elem<T>::load(static_cast<const typename Elem<T>::type*>(p), i);
}
template <ElemType T>
__device__ __forceinline__ void store_elem(void* p, int64_t i, float x) {
  Elem<T>::store(static_cast<typename Elem<T>::type*>(p), i, x);
}

// Calls f(std::integral_constant-like tag) with the ElemType as a template argument:
// dispatch(type, [&](auto tag) { kernel<decltype(tag)::value><<<...>>>(...); }).
template <ElemType T>
struct ElemTag {
  static constexpr ElemType value = T;
};
template <typename F>
cudaError_t dispatch(ElemType type, F&& f) {
  switch (type) {
    case ElemType::F32: f(ElemTag<ElemType::F32>{}); break;
    case ElemType::F16: f(ElemTag<ElemType::F16>{}); break;
    case ElemType::BF16: f(ElemTag<ElemType::BF16>{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int block) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace qlm::ops::cu
