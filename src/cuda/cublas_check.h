// cuBLAS / cuBLASLt return codes become qlm::Error "cuda.cublas" naming the call. For .cc files of
// the CUDA backend only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace qlm {
[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t status, const char* file, int line);
}

#define QLM_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                              \
    cublasStatus_t qlm_cublas_status = (call);                                                      \
    if (qlm_cublas_status != CUBLAS_STATUS_SUCCESS)                                                 \
      ::qlm::throw_cublas_error(#call, qlm_cublas_status, __FILE__, __LINE__);                      \
  } while (0)
