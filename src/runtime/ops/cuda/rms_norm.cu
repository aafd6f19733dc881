// RMSNorm: one block per vector, the sum of squares in double like the CPU op.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/env_switch.h"
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kMaxBlock = 1024;

// set_rms_norm_registers: -1 none (the environment decides), 0 / 1.
std::atomic<int> g_registers_override{-1};

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

// The four elements of `add` (type AT) at a0 + i.
template <ElemType AT>
__device__ __forceinline__ float4 load_elems4(const void* add, int64_t a0, int64_t i) {
  return make_float4(load_elem<AT>(add, a0 + i), load_elem<AT>(add, a0 + i + 1), load_elem<AT>(add, a0 + i + 2),
                     load_elem<AT>(add, a0 + i + 3));
}
// v + a, written back to x at xr + i (the residual add).
__device__ __forceinline__ float4 add_store4(float* xr, int64_t i, float4 v, float4 a) {
  v.x += a.x;
  v.y += a.y;
  v.z += a.z;
  v.w += a.w;
  *reinterpret_cast<float4*>(xr + i) = v;
  return v;
}
// The four elements of x at xr + i, with ADD their `add` (type AT, at a0 + i) added and written back to x.
template <ElemType AT, bool ADD>
__device__ __forceinline__ float4 load_add4(float* xr, const void* add, int64_t a0, int64_t i) {
  const float4 v = *reinterpret_cast<const float4*>(xr + i);
  if constexpr (ADD) return add_store4(xr, i, v, load_elems4<AT>(add, a0, i));
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
// PER > 0 (16-byte loads, at most PER float4s per thread: decode rows up to 4096 · PER elements and per-head norms):
// the thread's weights are loaded before the wait for the previous kernel (they never change) and all of its
// elements at once after it, kept in registers between the sum and the output, so the chain after the wait is one
// load round, not one per float4 and pass. Thread t's float4s are those at 4t, 4t + 4T, ... (T threads) and its sum
// adds them in that order, as the general form's loop does: the same operations in the same order, the same bits.
template <ElemType YT, ElemType AT, bool ADD, int PER>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_kernel(float* x, int64_t x_stride, const void* add, const float* weight, void* y, int64_t y_stride,
                    int64_t groups, int64_t dim, float eps, bool vec4, bool next_first) {
  if constexpr (PER > 0) {
    const int64_t i0 = 4 * threadIdx.x, step = 4 * static_cast<int64_t>(blockDim.x);
    float4 w[PER];
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int64_t i = i0 + j * step;
      w[j] = i < dim ? *reinterpret_cast<const float4*>(weight + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    enter_in_order(next_first);
    const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
    float* xr = x + r * x_stride + g * dim;
    const int64_t a0 = r * x_stride + g * dim, y0 = r * y_stride + g * dim;
    // Every load of the thread first, then the residual add's stores: a store to x between them would keep the
    // compiler from issuing the next float4's loads (add may alias x) before the previous one's arrived.
    float4 v[PER], a[PER];
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int64_t i = i0 + j * step;
      v[j] = i < dim ? *reinterpret_cast<const float4*>(xr + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if constexpr (ADD)
        if (i < dim) a[j] = load_elems4<AT>(add, a0, i);
    }
    if constexpr (ADD) {
#pragma unroll
      for (int j = 0; j < PER; ++j)
        if (i0 + j * step < dim) v[j] = add_store4(xr, i0 + j * step, v[j], a[j]);
    }
    double sum = 0;
#pragma unroll
    for (int j = 0; j < PER; ++j)
      if (i0 + j * step < dim) sum += sum_sq4(v[j]);
    const float inv = inv_rms(block_sum(sum), dim, eps);
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int64_t i = i0 + j * step;
      if (i < dim) store_norm4<YT>(y, y0 + i, v[j], w[j], inv);
    }
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

// Threads and 16-byte loads for vectors of `dim` floats `x_stride` apart from x; per: the float4s a thread holds in
// registers (the kernel's PER form, 1 to kMaxPer), 0 for the general form.
struct NormLaunch {
  bool vec4;
  unsigned threads;
  int per;
};
constexpr int kMaxPer = 4;  // rows up to 16384 elements in registers
NormLaunch norm_launch(const float* x, int64_t x_stride, const float* weight, int64_t dim) {
  const bool vec4 = dim % 4 == 0 && x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(weight) % 16 == 0;
  const int64_t per_thread = vec4 ? 4 : 1;
  const int64_t threads = std::min<int64_t>(kMaxBlock, std::max<int64_t>(32, (dim / per_thread + 31) / 32 * 32));
  // QLM_NORM_ONE=0: the general form everywhere (comparison); set_rms_norm_registers overrides it.
  static const bool env_registers = env_switch_on("QLM_NORM_ONE");
  const int override = g_registers_override.load(std::memory_order_relaxed);
  const bool registers = override < 0 ? env_registers : override != 0;
  const int64_t per = (dim + 4 * threads - 1) / (4 * threads);
  return {vec4, static_cast<unsigned>(threads), registers && vec4 && per <= kMaxPer ? static_cast<int>(per) : 0};
}

// The kernel for y type YT, add type AT and ADD in the form `per` (0: general; 3 runs the four-float4 kernel, whose
// fourth float4 lies past the row in every thread).
template <ElemType YT, ElemType AT, bool ADD>
auto norm_kernel(int per) {
  switch (per) {
    case 1: return rms_norm_kernel<YT, AT, ADD, 1>;
    case 2: return rms_norm_kernel<YT, AT, ADD, 2>;
    case 3:
    case 4: return rms_norm_kernel<YT, AT, ADD, 4>;
    default: return rms_norm_kernel<YT, AT, ADD, 0>;
  }
}

}  // namespace

void set_rms_norm_registers(int on) { g_registers_override.store(on, std::memory_order_relaxed); }

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
    launch_pdl(norm_kernel<YT, ElemType::F32, false>(l.per), static_cast<unsigned>(rows * groups), l.threads, 0, stream,
               xw, x_stride, static_cast<const void*>(nullptr), weight, y, y_stride, groups, dim, eps, l.vec4,
               next_first);
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
      launch_pdl(norm_kernel<YT, AT, true>(l.per), static_cast<unsigned>(rows), l.threads, 0, stream, x, dim, add,
                 weight, y, dim, int64_t{1}, dim, eps, l.vec4, next_first);
    });
  });
}

}  // namespace qlm::ops::cu
