// DType / KvDType → ElemType of the launchers, for the .cc wrappers of this folder (CUDA builds only).
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "runtime/ops/cuda/launch.h"
#include "runtime/ops/kv_cache.h"

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

// The storage type of a KV cache (fp8 included) for launch_kv_write / launch_attention.
inline ElemType kv_elem_type(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return ElemType::F32;
    case KvDType::F16: return ElemType::F16;
    case KvDType::BF16: return ElemType::BF16;
    case KvDType::F8E4M3: return ElemType::F8E4M3;
    case KvDType::F8E5M2: return ElemType::F8E5M2;
  }
  return ElemType::F32;
}

}  // namespace qlm::ops::cu
