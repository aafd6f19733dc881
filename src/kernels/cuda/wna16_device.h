// A `cuda_wna16` layout (wna16_layout.h) uploaded to a device: the tensors that own it and the
// pointer view the kernels take. Shared by the linear kernel and the grouped MoE kernel.
#pragma once
#ifdef QLM_WITH_CUDA

#include "core/tensor.h"
#include "kernels/cuda/wna16_kernels.h"
#include "kernels/cuda/wna16_layout.h"

namespace qlm {

struct Wna16DeviceLayout {
  Tensor codes, scales, zeros, row_source, chunk_group;  // on the device (zeros undefined without zero points)
  cuda::Wna16DeviceWeights view;                         // pointers into the tensors above
  size_t weight_bytes() const { return codes.nbytes() + scales.nbytes() + (zeros.defined() ? zeros.nbytes() : 0); }
};

Wna16DeviceLayout upload_wna16_layout(const CudaWna16Layout& layout, Device device);

}  // namespace qlm

#endif
