// A `cuda_wna16` layout (wna16_layout.h) uploaded to a device: the tensors that own it and the
// pointer view the kernels take, and the layer product on it. Shared by the linear kernel and the
// grouped MoE kernel (which runs each expert's own rows through run_wna16_linear).
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

// The WNA16 kernels' activation type of an activation dtype (F32, F16 or BF16).
cuda::Wna16Act wna16_act(DType d);

// y [M, w.N] = x [M, w.K] · W (+ bias F32 [w.N]) with x, y contiguous in `act` (F32, F16 or BF16) on
// `device`, enqueued on its qlm stream: for M <= kGemvMaxM a dequantizing split-K GEMV that reads
// the packed codes once, above it the weights dequantized into a scratch [K, N_pad] and cuBLAS
// (F32 accumulation; F32 activations in pedantic F32, never TF32). The caller checks the shapes.
void run_wna16_linear(const cuda::Wna16DeviceWeights& w, DType act, const Tensor& x, Tensor& y, const float* bias,
                      Device device);

}  // namespace qlm

#endif
