// The F32 dot product of two 16-byte vectors, the inner step of the GEMVs that read their rows as whole vectors (the
// dense GEMV, the MoE router folded into the routing kernel).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qlm::cuda {

__device__ __forceinline__ float vec_elem_float(float v) { return v; }
__device__ __forceinline__ float vec_elem_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float vec_elem_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// acc + the sum of w[e] · x[e] over the vector's 16 / sizeof(T) elements, one F32 FMA per element in element order,
// so the same inputs give the same bits wherever it is used. T: float, __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ float vec_dot_add(const uint4& wv, const uint4& xv, float acc) {
  const T* w = reinterpret_cast<const T*>(&wv);
  const T* x = reinterpret_cast<const T*>(&xv);
#pragma unroll
  for (int e = 0; e < static_cast<int>(16 / sizeof(T)); ++e)
    acc = fmaf(vec_elem_float(w[e]), vec_elem_float(x[e]), acc);
  return acc;
}

}  // namespace qlm::cuda
