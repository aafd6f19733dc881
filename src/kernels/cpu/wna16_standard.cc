#include "kernels/cpu/wna16_standard.h"

#include <string>

#include "kernels/cpu/kernel_args.h"

namespace qlm {
namespace {

void check_tensor(const Tensor& t, const char* name, DType dtype, const Shape& shape) {
  if (!t.defined()) fail("kernel.weights", tensor_context(name), "", "{} is missing", name);
  if (t.dtype() != dtype || t.shape() != shape || !t.device().is_cpu() || !t.is_contiguous())
    fail("kernel.weights", tensor_context(name), "this is a bug in the format's conversion to the standard form",
         "{} is {} (device {}, {}contiguous); expected contiguous CPU {}{}", name, t.str(), t.device().str(),
         t.is_contiguous() ? "" : "not ", dtype_name(dtype), shape_str(shape));
}

}  // namespace

void check_wna16_weights(const WNA16Weights& w) {
  int bits = w.weight_type.bits;
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    fail("kernel.weights", {}, "", "unsupported weight bits {} (expected 2, 3, 4 or 8)", bits);
  if (w.K <= 0 || w.N <= 0 || w.group_size <= 0)
    fail("kernel.weights", {}, "", "bad standard-form shape K={} N={} group_size={}", w.K, w.N, w.group_size);
  check_tensor(w.qweight, "qweight", DType::I32, {(w.K * bits + 31) / 32, w.N});
  if (!w.scales.defined() || w.scales.dim() != 2)
    fail("kernel.weights", tensor_context("scales"), "", "scales must be a 2-D F32 tensor");
  int64_t groups = w.scales.size(0);
  if (!w.g_idx.defined() && groups != (w.K + w.group_size - 1) / w.group_size)
    fail("kernel.weights", tensor_context("scales"), "", "scales has {} groups; K={} group_size={} needs {}", groups,
         w.K, w.group_size, (w.K + w.group_size - 1) / w.group_size);
  check_tensor(w.scales, "scales", DType::F32, {groups, w.N});
  if (w.zeros.defined()) {
    check_tensor(w.zeros, "zeros", DType::I32, {groups, w.N});
    for (int32_t z : w.zeros.span<int32_t>())
      if (z < 0 || z > w.weight_type.max_code())
        fail("kernel.weights", tensor_context("zeros"), "", "zero point {} outside [0, {}]", z, w.weight_type.max_code());
  }
  if (w.g_idx.defined()) {
    check_tensor(w.g_idx, "g_idx", DType::I32, {w.K});
    for (int32_t g : w.g_idx.span<int32_t>())
      if (g < 0 || g >= groups)
        fail("kernel.weights", tensor_context("g_idx"), "", "g_idx value {} outside [0, {})", g, groups);
  }
}

}  // namespace qlm
