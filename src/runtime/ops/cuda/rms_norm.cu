// RMSNorm: one block per vector, the sum of squares in double like the CPU op.
#include <algorithm>
#include <cstdint>

#include "core/env_switch.h"
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kMaxBlock = 1024;

// pdl_enter, or with next_first pdl_enter_next_first (chosen per launch: the model picks the norms whose next GEMM
// should start streaming its weights early; QLM_NORM_NEXT_FIRST, docs/cli.md).
__device__ __forceinline__ void enter_in_order(bool next_first) {
  if (next_first) {
    pdl_enter_next_first();
  } else {
    pdl_enter();
  }
}

// The block's sum of the threads' `sum`, in every thread (double, warp order then warp by warp: fixed).
__device__ __forceinline__ double block_sum(double sum) {
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ double partial[kMaxBlock / 32];
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  return total;
}

// The four elements of x at xr + i, with ADD their `add` (type AT, at a0 + i) added and written back to x.
template <ElemType AT, bool ADD>
__device__ __forceinline__ float4 load_add4(float* xr, const void* add, int64_t a0, int64_t i) {
  float4 v = *reinterpret_cast<const float4*>(xr + i);
  if constexpr (ADD) {
    v.x += load_elem<AT>(add, a0 + i);
    v.y += load_elem<AT>(add, a0 + i + 1);
    v.z += load_elem<AT>(add, a0 + i + 2);
    v.w += load_elem<AT>(add, a0 + i + 3);
    *reinterpret_cast<float4*>(xr + i) = v;
  }
  return v;
}
__device__ __forceinline__ double sum_sq4(float4 v) {
  return static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
         static_cast<double>(v.w) * v.w;
}
__device__ __forceinline__ float inv_rms(double total, int64_t dim, float eps) {
  return static_cast<float>(1.0 / sqrt(total / static_cast<double>(dim) + eps));
}
// y[y0 .. y0 + 3] = w ⊙ (v · inv) in YT.
template <ElemType YT>
__device__ __forceinline__ void store_norm4(void* y, int64_t y0, float4 v, float4 w, float inv) {
  store_elem<YT>(y, y0, w.x * (v.x * inv));
  store_elem<YT>(y, y0 + 1, w.y * (v.y * inv));
  store_elem<YT>(y, y0 + 2, w.z * (v.z * inv));
  store_elem<YT>(y, y0 + 3, w.w * (v.w * inv));
}

// One block per vector, sized to the vector (up to 1024 threads, four elements each where rows
// allow 16-byte loads) so that every load of a vector is in flight at once: a single decode row
// (dim 4096) is one load per thread, not a latency-bound loop of 32. With ADD, the vector first
// gets `add` (same layout, type AT) added and written back to x: the residual add fused in.
// ONE (16-byte loads, at most four elements per thread: decode rows up to 4096 and per-head norms): the thread's
// weights are loaded before the wait for the previous kernel (they never change) and its elements stay in
// registers between the sum and the output, so the chain after the wait is one load round, not two. The same
// operations in the same order as the general form: the same bits.
template <ElemType YT, ElemType AT, bool ADD, bool ONE>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_kernel(float* x, int64_t x_stride, const void* add, const float* weight, void* y, int64_t y_stride,
                    int64_t groups, int64_t dim, float eps, bool vec4, bool next_first) {
  if constexpr (ONE) {
    const int64_t i = 4 * threadIdx.x;
    const bool has = i < dim;
    const float4 w = has ? *reinterpret_cast<const float4*>(weight + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    enter_in_order(next_first);
    const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
    float* xr = x + r * x_stride + g * dim;
    const int64_t a0 = r * x_stride + g * dim, y0 = r * y_stride + g * dim;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    double sum = 0;
    if (has) {
      v = load_add4<AT, ADD>(xr, add, a0, i);
      sum += sum_sq4(v);
    }
    const float inv = inv_rms(block_sum(sum), dim, eps);
    if (has) store_norm4<YT>(y, y0 + i, v, w, inv);
    return;
  }
  enter_in_order(next_first);
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  float* xr = x + r * x_stride + g * dim;
  const int64_t a0 = r * x_stride + g * dim;  // add has x's layout
  const int64_t y0 = r * y_stride + g * dim;
  double sum = 0;
  if (vec4) {
    for (int64_t i = 4 * threadIdx.x; i < dim; i += 4 * blockDim.x) sum += sum_sq4(load_add4<AT, ADD>(xr, add, a0, i));
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float v = xr[i];
      if constexpr (ADD) {
        v += load_elem<AT>(add, a0 + i);
        xr[i] = v;
      }
      sum += static_cast<double>(v) * v;
    }
  }
  const float inv = inv_rms(block_sum(sum), dim, eps);
  // Each element is read (and, with ADD, written) by the same thread in both loops, and every sum
  // was complete at the barrier above, so y may alias x.
  if (vec4) {
    for (int64_t i = 4 * threadIdx.x; i < dim; i += 4 * blockDim.x) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i);
      const float4 w = *reinterpret_cast<const float4*>(weight + i);
      store_norm4<YT>(y, y0 + i, v, w, inv);
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) store_elem<YT>(y, y0 + i, weight[i] * (xr[i] * inv));
  }
}

// Threads and 16-byte loads for vectors of `dim` floats `x_stride` apart from x; one: at most one 16-byte load
// per thread (the kernel's ONE form).
struct NormLaunch {
  bool vec4;
  unsigned threads;
  bool one;
};
NormLaunch norm_launch(const float* x, int64_t x_stride, const float* weight, int64_t dim) {
  const bool vec4 = dim % 4 == 0 && x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(weight) % 16 == 0;
  const int64_t per_thread = vec4 ? 4 : 1;
  const int64_t threads = std::min<int64_t>(kMaxBlock, std::max<int64_t>(32, (dim / per_thread + 31) / 32 * 32));
  static const bool one_ok = env_switch_on("QLM_NORM_ONE");  // 0: the general form everywhere (comparison)
  return {vec4, static_cast<unsigned>(threads), one_ok && vec4 && dim <= 4 * threads};
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, int64_t x_stride, const float* weight, void* y, ElemType y_type,
                            int64_t y_stride, int64_t rows, int64_t groups, int64_t dim, float eps, cudaStream_t stream,
                            bool next_first) {
  if (rows * groups == 0) return cudaSuccess;
  if (rows * groups > int64_t{0x7fffffff}) return cudaErrorInvalidValue;
  const NormLaunch l = norm_launch(x, x_stride, weight, dim);
  // Without ADD the kernel does not write x (only y, which may alias it).
  float* xw = const_cast<float*>(x);
  return dispatch(y_type, [&](auto tag) {
    constexpr ElemType YT = decltype(tag)::value;
    launch_pdl(
        l.one ? rms_norm_kernel<YT, ElemType::F32, false, true> : rms_norm_kernel<YT, ElemType::F32, false, false>,
        static_cast<unsigned>(rows * groups), l.threads, 0, stream, xw, x_stride, static_cast<const void*>(nullptr),
        weight, y, y_stride, groups, dim, eps, l.vec4, next_first);
  });
}

cudaError_t launch_add_rms_norm(float* x, const void* add, ElemType add_type, const float* weight, void* y,
                                ElemType y_type, int64_t rows, int64_t dim, float eps, cudaStream_t stream,
                                bool next_first) {
  if (rows == 0) return cudaSuccess;
  if (rows > int64_t{0x7fffffff} ||
      (add_type != ElemType::F32 && add_type != ElemType::F16 && add_type != ElemType::BF16))
    return cudaErrorInvalidValue;
  const NormLaunch l = norm_launch(x, dim, weight, dim);
  return dispatch(y_type, [&](auto ytag) {
    dispatch(add_type, [&](auto atag) {
      constexpr ElemType YT = decltype(ytag)::value, AT = decltype(atag)::value;
      launch_pdl(l.one ? rms_norm_kernel<YT, AT, true, true> : rms_norm_kernel<YT, AT, true, false>,
                 static_cast<unsigned>(rows), l.threads, 0, stream, x, dim, add, weight, y, dim, int64_t{1}, dim, eps,
                 l.vec4, next_first);
    });
  });
}

}  // namespace qlm::ops::cu
