#include "cuda/fill.h"

namespace qlm::cuda {
namespace {
__global__ void fill_f32_kernel(float* data, size_t count, float value) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    data[i] = value;
}
}  // namespace

cudaError_t fill_f32(float* data, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  unsigned blocks = static_cast<unsigned>(count / 256 + 1 < 4096 ? count / 256 + 1 : 4096);
  fill_f32_kernel<<<blocks, 256, 0, stream>>>(data, count, value);
  return cudaGetLastError();
}
}  // namespace qlm::cuda
