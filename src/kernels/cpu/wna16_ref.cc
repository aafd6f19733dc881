// `cpu_ref` mixed-precision kernel: the oracle. Dequantizes every weight exactly from the standard
// form and accumulates in double; handles every bit width, group size, zero points and act-order.
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/wna16_standard.h"
#include "kernels/mp_linear.h"

namespace qlm {

std::optional<std::string> cpu_wna16_can_implement(const MPLinearLayerConfig& c) {
  if (c.device.type != DeviceType::CPU) return "runs on CPU only";
  int bits = c.weight_type.bits;
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    return fmt::format("weight type {} has {} bits; supported: 2, 3, 4, 8", c.weight_type.name(), bits);
  if (c.act_dtype != DType::F32 && c.act_dtype != DType::BF16 && c.act_dtype != DType::F16)
    return fmt::format("activation dtype {} is not F32, BF16 or F16", dtype_name(c.act_dtype));
  if (c.group_size != -1 && c.group_size <= 0) return fmt::format("group size {} is invalid", c.group_size);
  if (c.K_p <= 0 || c.N_p <= 0) return fmt::format("empty partition K_p={} N_p={}", c.K_p, c.N_p);
  return std::nullopt;
}

namespace {

class Wna16RefKernel final : public MPLinearKernel {
 public:
  std::string name() const override { return "cpu_ref"; }

  void prepare(WNA16Weights weights) override {
    check_wna16_weights(weights);
    w_ = std::move(weights);
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t K = w_.K, N = w_.N;
    const int64_t M = check_linear_args("cpu_ref", x, y, bias, K, N);
    const int bits = w_.weight_type.bits;
    const int32_t* q = w_.qweight.data<int32_t>();
    const float* scales = w_.scales.data<float>();
    const int32_t* zeros = w_.zeros.defined() ? w_.zeros.data<int32_t>() : nullptr;
    const int32_t* g_idx = w_.g_idx.defined() ? w_.g_idx.data<int32_t>() : nullptr;
    const float* xs = x.data<float>();
    float* ys = y.data<float>();
    const float* b = bias ? bias->data<float>() : nullptr;

    // Columns are independent: each task owns a column range and all M rows of it.
    compute_pool().parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
      const int64_t width = n1 - n0;
      std::vector<double> acc(static_cast<size_t>(M * width), 0.0);
      std::vector<double> wrow(static_cast<size_t>(width));
      for (int64_t k = 0; k < K; ++k) {
        const int64_t g = g_idx ? g_idx[k] : k / w_.group_size;
        for (int64_t n = n0; n < n1; ++n) {
          const double zero = zeros ? zeros[g * N + n] : w_.weight_type.bias;
          wrow[n - n0] = (static_cast<double>(wna16_code(q, N, k, n, bits)) - zero) * scales[g * N + n];
        }
        for (int64_t m = 0; m < M; ++m) {
          const double xv = xs[m * K + k];
          double* a = &acc[m * width];
          for (int64_t j = 0; j < width; ++j) a[j] += xv * wrow[j];
        }
      }
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = n0; n < n1; ++n)
          ys[m * N + n] = static_cast<float>(acc[m * width + (n - n0)] + (b ? b[n] : 0.0));
    });
  }

  size_t weight_bytes() const override {
    size_t bytes = w_.qweight.nbytes() + w_.scales.nbytes();
    if (w_.zeros.defined()) bytes += w_.zeros.nbytes();
    if (w_.g_idx.defined()) bytes += w_.g_idx.nbytes();
    return bytes;
  }

 private:
  WNA16Weights w_;
};

const MPKernelRegistrar kRegisterRef{{
    .name = "cpu_ref",
    .backend = "cpu_ref",
    .device = DeviceType::CPU,
    .priority = 100,
    .can_implement = cpu_wna16_can_implement,
    .create = [](const MPLinearLayerConfig&) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<Wna16RefKernel>();
    },
}};

}  // namespace
}  // namespace qlm
