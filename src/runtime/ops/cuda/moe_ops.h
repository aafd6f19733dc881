// Tensor-level MoE op of the decoder on CUDA (the routing and expert kernels are the fused-MoE
// kernel's, kernels/cuda/moe_cuda.cc). Defined only with QLM_WITH_CUDA.
#pragma once

#include "core/tensor.h"

namespace qlm::ops::cu {

// y[t, :] += sigmoid(gate[t]) * shared[t, :] (Qwen2-MoE's shared expert): y F32 [T, H], shared
// [T, H] and gate [T, 1] in F32, F16 or BF16, all on one device.
void add_sigmoid_gated(Tensor& y, const Tensor& shared, const Tensor& gate);

}  // namespace qlm::ops::cu
