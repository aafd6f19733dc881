#include "kernels/cuda/linear_run_args.h"

#include "core/error.h"

namespace qlm::cuda {

namespace {
ErrorContext tensor_ctx(const char* tensor) {
  ErrorContext context;
  context.tensor = tensor;
  return context;
}
}  // namespace

int64_t check_linear_run_args(const LinearRunShape& s, const Tensor& x, const Tensor& y, const Tensor* bias) {
  auto ok = [&](const Tensor& t, DType want, int64_t last) {
    return t.defined() && t.dtype() == want && t.device() == s.device && t.is_contiguous() && t.dim() >= 1 &&
           t.size(t.dim() - 1) == last;
  };
  auto bad = [&](const char* what, const Tensor& t, DType want, int64_t last) {
    fail("kernel.args", tensor_ctx(what), "", "{}: {} is {} on {}; expected contiguous {} on {} with last dim {}", s.kernel,
         what, t.defined() ? t.str() : std::string("undefined"), t.device().str(), dtype_name(want), s.device.str(),
         last);
  };
  if (!ok(x, s.act, s.K)) bad("x", x, s.act, s.K);
  if (!ok(y, s.act, s.N)) bad("y", y, s.act, s.N);
  const int64_t M = x.numel() / s.K;
  if (M < 1 || y.numel() != M * s.N)
    fail("kernel.args", tensor_ctx("y"), "", "{}: y is {} but x {} gives {} rows of {}", s.kernel, y.str(), x.str(), M,
         s.N);
  if (M > s.max_rows)
    fail("kernel.args", tensor_ctx("x"), "split the batch", "{}: {} rows exceed the kernel's limit of {}", s.kernel, M,
         s.max_rows);
  if (bias && (!ok(*bias, DType::F32, s.N) || bias->numel() != s.N)) bad("bias", *bias, DType::F32, s.N);
  return M;
}

}  // namespace qlm::cuda
