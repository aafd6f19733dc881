// Argument checks shared by the CPU linear kernels' run().
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"

namespace qlm {

inline ErrorContext tensor_context(std::string tensor) {
  ErrorContext context;
  context.tensor = std::move(tensor);
  return context;
}

// Validates y[M, N] = x[M, K] (+ bias[N]) for contiguous F32 CPU tensors; returns M.
// x may have any rank >= 1 whose last dim is K (rows = product of the others).
inline int64_t check_linear_args(const char* kernel, const Tensor& x, const Tensor& y, const Tensor* bias,
                                 int64_t K, int64_t N) {
  auto bad = [&](const char* what, const Tensor& t) {
    fail("kernel.args", tensor_context(what), "", "{}: {} is {} on {}; expected contiguous CPU F32 with last dim {}",
         kernel, what, t.str(), t.device().str(), what[0] == 'x' ? K : N);
  };
  if (!x.defined() || x.dtype() != DType::F32 || !x.device().is_cpu() || !x.is_contiguous() || x.dim() < 1 ||
      x.size(x.dim() - 1) != K)
    bad("x", x);
  if (!y.defined() || y.dtype() != DType::F32 || !y.device().is_cpu() || !y.is_contiguous() || y.dim() < 1 ||
      y.size(y.dim() - 1) != N)
    bad("y", y);
  int64_t M = x.numel() / K;
  if (y.numel() != M * N)
    fail("kernel.args", tensor_context("y"), "", "{}: y is {} but x {} gives {} rows of {}", kernel, y.str(), x.str(), M, N);
  if (bias && (!bias->defined() || bias->dtype() != DType::F32 || !bias->device().is_cpu() ||
               !bias->is_contiguous() || bias->numel() != N))
    bad("bias", *bias);
  return M;
}

}  // namespace qlm
