// `cpu_ref` scaled-mm: the oracle. Activations through the shared quantizers, then exact
// arithmetic: INT8 products accumulated in int64 (exact), FP8 and W8A16 products of the
// dequantized values accumulated in double. Slow; every configuration.
#include <vector>

#include "core/float_convert.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

class ScaledMMRefKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMRefKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cpu_ref"; }

  void prepare(ScaledMMWeights w) override {
    check_scaled_mm_weights(c_, w);
    w_ = std::move(w);
    const int64_t N = w_.N, K = w_.K;
    wq_.resize(static_cast<size_t>(N * K));
    if (c_.weight_type == W8Type::Int8) {
      auto codes = w_.codes.span<int8_t>();
      for (size_t i = 0; i < wq_.size(); ++i) wq_[i] = codes[i];
    } else {
      auto codes = w_.codes.span<uint8_t>();
      for (size_t i = 0; i < wq_.size(); ++i) wq_[i] = e4m3_to_f32(codes[i]);
    }
  }

  // Scale of weight element (n, k).
  double wscale(int64_t n, int64_t k) const {
    const float* s = w_.weight_scale.data<float>();
    switch (c_.weight_scale) {
      case WeightScaleKind::Tensor: return s[0];
      case WeightScaleKind::Channel: return s[n];
      case WeightScaleKind::Block: {
        const int64_t cols = w_.weight_scale.size(1);
        return s[n * cols + (k + w_.k_phase) / w_.block_k];
      }
    }
    return 0;
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t K = c_.K_p, N = c_.N_p;
    const int64_t M = check_linear_args("cpu_ref", x, y, bias, K, N);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const float* b = bias ? bias->data<float>() : nullptr;
    if (c_.weight_type == W8Type::Int8 && c_.act != ActScheme::None) {
      std::vector<int8_t> q(static_cast<size_t>(M * K));
      ActScales s = quantize_acts_int8(c_, w_, xp, M, q.data(), K, nullptr);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += (int64_t{q[m * K + k]} - s.zero[m]) * static_cast<int64_t>(wq_[n * K + k]);
          const double out = static_cast<double>(s.scale[m]) * wscale(n, 0) * static_cast<double>(acc);
          yp[m * N + n] = static_cast<float>(out + (b ? b[n] : 0.0));
        }
      return;
    }
    std::vector<float> xq;
    ActScales s;
    const bool quantized = c_.act != ActScheme::None;
    if (quantized) {
      xq.resize(static_cast<size_t>(M * K));
      s = quantize_acts_fp8(c_, w_, xp, M, xq.data(), K, nullptr);
    }
    const int64_t phase = c_.act == ActScheme::DynamicTokenGroup ? w_.k_phase % c_.act_group : 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double xv = xp[m * K + k];
          if (quantized) {
            const int64_t g = c_.act == ActScheme::DynamicTokenGroup ? (k + phase) / c_.act_group : 0;
            xv = static_cast<double>(xq[m * K + k]) * s.scale[m * s.groups + g];
          }
          acc += xv * (static_cast<double>(wq_[n * K + k]) * wscale(n, k));
        }
        yp[m * N + n] = static_cast<float>(acc + (b ? b[n] : 0.0));
      }
  }

  size_t weight_bytes() const override { return w_.codes.nbytes() + w_.weight_scale.nbytes(); }

 private:
  ScaledMMConfig c_;
  ScaledMMWeights w_;
  std::vector<float> wq_;  // codes as exact floats (int8 values or e4m3 values)
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cpu_ref",
    .backend = "cpu_ref",
    .device = DeviceType::CPU,
    .priority = 100,
    .can_implement = [](const ScaledMMConfig& c) -> std::optional<std::string> {
      if (c.device.type != DeviceType::CPU) return "runs on CPU only";
      if (auto r = scaled_mm_common_reason(c)) return r;
      if (c.weight_type == W8Type::Int8 && c.weight_scale == WeightScaleKind::Block)
        return std::string("INT8 weights take tensor or channel scales, not blocks");
      if (c.weight_type == W8Type::Int8 && c.act == ActScheme::DynamicTokenGroup)
        return std::string("INT8 activations are quantized per tensor or per token, not per group");
      if (c.weight_type == W8Type::Fp8E4M3 && !c.act_symmetric)
        return std::string("FP8 activations are symmetric");
      return std::nullopt;
    },
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMRefKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
