// Element-wise epilogue of the cuBLASLt-based linear kernels: turns the GEMM's raw output into
// y[m, n] = (acc[m, n] - z[m] * colsum[n]) * s_row[m] * s_col[n] + bias[n] in the activation type.
// acc may alias y (same element type and layout: each element is read before it is written).
// Plain declarations (C++17): included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

enum AccType : int { kAccF32 = 0, kAccF16 = 1, kAccBF16 = 2, kAccI32 = 3 };  // F32..BF16 match FloatType

struct EpilogueArgs {
  const void* acc = nullptr;  // [M, N] of acc_type
  int acc_type = kAccF32;
  void* y = nullptr;  // [M, N] of y_type (FloatType)
  int y_type = 0;
  int64_t M = 0, N = 0;
  const float* row_scale = nullptr;  // null: 1; row_scale_stride 0: one value for every row
  int row_scale_stride = 1;
  const float* col_scale = nullptr;  // null: 1; col_scale_stride 0: one value for every column
  int col_scale_stride = 1;
  const int32_t* row_zero = nullptr;  // INT8 asymmetric activations: [M] zero points ...
  const int32_t* col_sum = nullptr;   // ... and [N] weight column sums (sum over k of the codes)
  const float* bias = nullptr;        // [N] or null
};

// INT8 accumulators are corrected in int64 and scaled in double exactly like the cpu_ref oracle
// ((s_row * s_col) * acc + bias, rounded once to f32); float accumulators are scaled in f32.
cudaError_t launch_epilogue(const EpilogueArgs& args, cudaStream_t stream);

}  // namespace qlm::cuda
