// The reference dense kernel: weights converted exactly to double, products accumulated in double.
// The oracle for the fast dense kernels; chosen only when nothing faster can run the layer.
#include <vector>

#include "kernels/dense_linear.h"

namespace qlm {
namespace {

class DenseRefKernel final : public DenseLinearKernel {
 public:
  explicit DenseRefKernel(const DenseLinearConfig& cfg) : cfg_(cfg) {}
  std::string name() const override { return "cpu_ref"; }

  void prepare(const Tensor& weight) override {
    QLM_CHECK(weight.dim() == 2 && weight.size(0) == cfg_.N_p && weight.size(1) == cfg_.K_p);
    Tensor w = weight.to(DType::F64);
    const auto span = w.span<double>();
    w_.assign(span.begin(), span.end());
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = x.size(0), K = cfg_.K_p, N = cfg_.N_p;
    QLM_CHECK(x.dim() == 2 && x.size(1) == K && y.dim() == 2 && y.size(0) == M && y.size(1) == N);
    std::vector<double> b;
    if (bias) {
      Tensor bd = bias->to(DType::F64);
      b.assign(bd.span<double>().begin(), bd.span<double>().end());
      QLM_CHECK(static_cast<int64_t>(b.size()) == N);
    }
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = b.empty() ? 0.0 : b[static_cast<size_t>(n)];
        const double* wr = w_.data() + n * K;
        const float* xr = xp + m * K;
        for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xr[k]) * wr[k];
        yp[m * N + n] = static_cast<float>(acc);
      }
  }

  size_t weight_bytes() const override { return w_.size() * sizeof(double); }

 private:
  DenseLinearConfig cfg_;
  std::vector<double> w_;  // [N_p, K_p]
};

const DenseKernelRegistrar kRegisterDenseRef{{
    .name = "cpu_ref",
    .backend = "cpu_ref",
    .device = DeviceType::CPU,
    .priority = 1000,
    .can_implement = [](const DenseLinearConfig& c) -> std::optional<std::string> {
      if (c.weight_dtype != DType::F32 && c.weight_dtype != DType::F16 && c.weight_dtype != DType::BF16 &&
          c.weight_dtype != DType::F64)
        return fmt::format("weight dtype {} is not a float type", dtype_name(c.weight_dtype));
      if (c.act_dtype != DType::F32) return fmt::format("activations must be F32, got {}", dtype_name(c.act_dtype));
      return std::nullopt;
    },
    .create = [](const DenseLinearConfig& c) -> std::unique_ptr<DenseLinearKernel> {
      return std::make_unique<DenseRefKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
