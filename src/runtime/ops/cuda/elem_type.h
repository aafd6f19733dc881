// DType → ElemType of the launchers, for the .cc wrappers of this folder (CUDA builds only).
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "runtime/ops/cuda/launch.h"

namespace qlm::ops::cu {

inline ElemType elem_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ElemType::F32;
    case DType::F16: return ElemType::F16;
    case DType::BF16: return ElemType::BF16;
    default:
      fail("device.dtype", {}, "use F32, F16 or BF16", "the CUDA runtime ops take F32, F16 or BF16 tensors, not {}",
           dtype_name(dtype));
  }
}

}  // namespace qlm::ops::cu
