// Argument checks of the CUDA linear kernels' run(): x [M, K] and y [M, N] contiguous on the
// kernel's device in its activation dtype, bias F32 [N] on the same device. Host-only code.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace qlm {

// Returns M (rows of x; any rank >= 1 whose last dim is K).
inline int64_t check_cuda_linear_args(const char* kernel, const Tensor& x, const Tensor& y, const Tensor* bias,
                                      int64_t K, int64_t N, DType act, Device device) {
  auto bad = [&](const char* what, const Tensor& t, DType want, int64_t last) {
    ErrorContext ctx;
    ctx.tensor = what;
    fail("kernel.args", ctx, "", "{}: {} is {} on {}; expected contiguous {} on {} with last dim {}", kernel, what,
         t.defined() ? t.str() : std::string("undefined"), t.device().str(), dtype_name(want), device.str(), last);
  };
  auto ok = [&](const Tensor& t, DType want, int64_t last) {
    return t.defined() && t.dtype() == want && t.device() == device && t.is_contiguous() && t.dim() >= 1 &&
           t.size(t.dim() - 1) == last;
  };
  if (!ok(x, act, K)) bad("x", x, act, K);
  if (!ok(y, act, N)) bad("y", y, act, N);
  const int64_t M = K > 0 ? x.numel() / K : 0;
  if (y.numel() != M * N) {
    ErrorContext ctx;
    ctx.tensor = "y";
    fail("kernel.args", ctx, "", "{}: y is {} but x {} gives {} rows of {}", kernel, y.str(), x.str(), M, N);
  }
  if (bias && (!ok(*bias, DType::F32, N) || bias->numel() != N)) bad("bias", *bias, DType::F32, N);
  return M;
}

}  // namespace qlm
