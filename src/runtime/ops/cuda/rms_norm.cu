// RMSNorm: one block per vector, the sum of squares in double like the CPU op.
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kBlock = 128;

template <ElemType YT>
__global__ void rms_norm_kernel(const float* x, int64_t x_stride, const float* weight, void* y, int64_t y_stride,
                                int64_t groups, int64_t dim, float eps) {
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups;
  const float* xr = x + r * x_stride + g * dim;
  const int64_t y0 = r * y_stride + g * dim;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += static_cast<double>(xr[i]) * xr[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ double partial[kBlock / 32];
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kBlock / 32; ++w) total += partial[w];
  const float inv = static_cast<float>(1.0 / sqrt(total / static_cast<double>(dim) + eps));
  // Every thread read its own elements before any writes them (y may alias x): each element is
  // read and written by the same thread, and the sum was complete at the barrier above.
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) store_elem<YT>(y, y0 + i, weight[i] * (xr[i] * inv));
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, int64_t x_stride, const float* weight, void* y, ElemType y_type,
                            int64_t y_stride, int64_t rows, int64_t groups, int64_t dim, float eps,
                            cudaStream_t stream) {
  if (rows * groups == 0) return cudaSuccess;
  if (rows * groups > int64_t{0x7fffffff}) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows * groups);
  return dispatch(y_type, [&](auto tag) {
    rms_norm_kernel<decltype(tag)::value><<<grid, kBlock, 0, stream>>>(x, x_stride, weight, y, y_stride, groups, dim, eps);
  });
}

}  // namespace qlm::ops::cu
