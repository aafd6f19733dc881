// The CUDA library data type (cuBLAS / cuBLASLt operands) of an activation dtype.
#pragma once
#ifdef QLM_WITH_CUDA

#include <library_types.h>

#include "core/dtype.h"

namespace qlm::cuda {

// F32 -> CUDA_R_32F, F16 -> CUDA_R_16F, BF16 -> CUDA_R_16BF (the activation dtypes on CUDA; the
// callers' can_implement admits no other).
inline cudaDataType_t data_type_of(DType d) {
  return d == DType::F32 ? CUDA_R_32F : d == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace qlm::cuda

#endif
