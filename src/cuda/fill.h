// Fills device memory with a float value (poisoning output buffers in GPU tests).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace qlm::cuda {
cudaError_t fill_f32(float* data, size_t count, float value, cudaStream_t stream);
}
