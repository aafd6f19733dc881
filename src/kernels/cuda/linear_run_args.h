// The argument check every CUDA linear kernel's run() starts with: x [M, K] and y [M, N] contiguous
// in the activation dtype on the kernel's device, bias F32 [N] on the same device or absent.
// Host code only (no CUDA headers), so it is shared by kernels of every family.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace qlm::cuda {

struct LinearRunShape {
  const char* kernel;  // named in errors, e.g. "cuda_wna16"
  Device device;
  DType act;
  int64_t K = 0, N = 0;
  int64_t max_rows = 0;  // the kernel's limit on M (its int index range)
};

// Returns M, or throws "kernel.args" naming the tensor, what it is and what was expected.
int64_t check_linear_run_args(const LinearRunShape& s, const Tensor& x, const Tensor& y, const Tensor* bias);

}  // namespace qlm::cuda
