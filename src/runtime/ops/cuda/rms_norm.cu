// RMSNorm: one block per vector, the sum of squares in double like the CPU op.
#include <algorithm>
#include <cstdint>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kMaxBlock = 1024;

// One block per vector, sized to the vector (up to 1024 threads, four elements each where rows
// allow 16-byte loads) so that every load of a vector is in flight at once: a single decode row
// (dim 4096) is one load per thread, not a latency-bound loop of 32.
template <ElemType YT>
__global__ void __launch_bounds__(kMaxBlock) rms_norm_kernel(const float* x, int64_t x_stride, const float* weight,
                                                             void* y, int64_t y_stride, int64_t groups, int64_t dim,
                                                             float eps, bool vec4) {
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  const float* xr = x + r * x_stride + g * dim;
  const int64_t y0 = r * y_stride + g * dim;
  double sum = 0;
  if (vec4) {
    for (int64_t i = 4 * threadIdx.x; i < dim; i += 4 * blockDim.x) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i);
      sum += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
             static_cast<double>(v.w) * v.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += static_cast<double>(xr[i]) * xr[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ double partial[kMaxBlock / 32];
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  const float inv = static_cast<float>(1.0 / sqrt(total / static_cast<double>(dim) + eps));
  // Every thread read its own elements before any writes them (y may alias x): each element is
  // read and written by the same thread, and the sum was complete at the barrier above.
  if (vec4) {
    for (int64_t i = 4 * threadIdx.x; i < dim; i += 4 * blockDim.x) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i);
      const float4 w = *reinterpret_cast<const float4*>(weight + i);
      store_elem<YT>(y, y0 + i, w.x * (v.x * inv));
      store_elem<YT>(y, y0 + i + 1, w.y * (v.y * inv));
      store_elem<YT>(y, y0 + i + 2, w.z * (v.z * inv));
      store_elem<YT>(y, y0 + i + 3, w.w * (v.w * inv));
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) store_elem<YT>(y, y0 + i, weight[i] * (xr[i] * inv));
  }
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, int64_t x_stride, const float* weight, void* y, ElemType y_type,
                            int64_t y_stride, int64_t rows, int64_t groups, int64_t dim, float eps,
                            cudaStream_t stream) {
  if (rows * groups == 0) return cudaSuccess;
  if (rows * groups > int64_t{0x7fffffff}) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows * groups);
  // 16-byte loads when every vector (and the weight) starts 16-byte aligned.
  const bool vec4 = dim % 4 == 0 && x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(weight) % 16 == 0;
  const int64_t per_thread = vec4 ? 4 : 1;
  const int64_t threads = std::min<int64_t>(kMaxBlock, std::max<int64_t>(32, (dim / per_thread + 31) / 32 * 32));
  return dispatch(y_type, [&](auto tag) {
    rms_norm_kernel<decltype(tag)::value><<<grid, static_cast<unsigned>(threads), 0, stream>>>(
        x, x_stride, weight, y, y_stride, groups, dim, eps, vec4);
  });
}

}  // namespace qlm::ops::cu
