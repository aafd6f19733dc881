// Every CUDA runtime return code is checked; failures become qlm::Error "cuda.error" naming the
// call. Usable from .cu files: it includes no fmt (nvcc cannot compile fmt's format checks).
#pragma once

#include <cuda_runtime.h>

namespace qlm {
[[noreturn]] void throw_cuda_error(const char* call, cudaError_t status, const char* file, int line);
}

#define QLM_CUDA_CHECK(call)                                                              \
  do {                                                                                    \
    cudaError_t qlm_cuda_status = (call);                                                 \
    if (qlm_cuda_status != cudaSuccess) ::qlm::throw_cuda_error(#call, qlm_cuda_status, __FILE__, __LINE__); \
  } while (0)
