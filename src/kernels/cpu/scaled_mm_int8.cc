// Registration and driver of the cpu_fast INT8 W8A8 kernels (scaled_mm_int8.h): quantize the
// activations once (shared quantizers, so codes equal cpu_ref's), then split output panels and
// row chunks over the compute pool.
#include "kernels/cpu/scaled_mm_int8.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

class Int8FastKernel final : public ScaledMMKernel {
 public:
  Int8FastKernel(const ScaledMMConfig& c, const Int8ScaledOps* ops, std::string name)
      : c_(c), ops_(ops), name_(std::move(name)) {}
  std::string name() const override { return name_; }

  void prepare(ScaledMMWeights w) override {
    check_scaled_mm_weights(c_, w);
    w_.K = w.K;
    w_.N = w.N;
    w_.input_scale = w.input_scale;
    w_.input_zero_point = w.input_zero_point;
    p_.K = w.K;
    p_.N = w.N;
    p_.panel = ops_->panel;
    p_.K_pad = (w.K + ops_->k_step - 1) / ops_->k_step * ops_->k_step;
    p_.N_pad = (w.N + p_.panel - 1) / p_.panel * p_.panel;
    const int8_t* codes = w.codes.data<int8_t>();
    ops_->pack(codes, p_);
    p_.colsum.assign(static_cast<size_t>(p_.N_pad), 0);
    p_.col_scale.assign(static_cast<size_t>(p_.N_pad), 0.0f);
    const float* s = w.weight_scale.data<float>();
    for (int64_t n = 0; n < w.N; ++n) {
      int32_t sum = 0;
      for (int64_t k = 0; k < w.K; ++k) sum += codes[n * w.K + k];
      p_.colsum[static_cast<size_t>(n)] = sum;
      p_.col_scale[static_cast<size_t>(n)] = c_.weight_scale == WeightScaleKind::Tensor ? s[0] : s[n];
    }
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_linear_args(name_.c_str(), x, y, bias, c_.K_p, c_.N_p);
    if (M == 0) return;
    ThreadPool& pool = compute_pool();
    std::vector<int8_t> xq(static_cast<size_t>(M * p_.K_pad), 0);
    ActScales s = quantize_acts_int8(c_, w_, x.data<float>(), M, xq.data(), p_.K_pad, &pool);
    std::vector<float> bias_pad;
    if (bias) {
      bias_pad.assign(static_cast<size_t>(p_.N_pad), 0.0f);
      std::memcpy(bias_pad.data(), bias->data<float>(), static_cast<size_t>(c_.N_p) * sizeof(float));
    }
    const Int8Epilogue e{.row_scale = s.scale.data(), .row_zp = s.zero.data(),
                         .bias = bias ? bias_pad.data() : nullptr, .y = y.data<float>(), .N = c_.N_p};
    const int64_t panels = p_.N_pad / p_.panel;
    // Row chunks only when there are too few panels to keep every thread busy several times over.
    const int64_t row_chunk = 96;
    const int64_t chunks = M <= row_chunk ? 1 : (M + row_chunk - 1) / row_chunk;
    const int64_t tasks = panels * chunks;
    pool.run(tasks, [&](int64_t task) {
      thread_local std::vector<int32_t> scratch;
      scratch.resize(static_cast<size_t>(ops_->scratch_ints));
      const int64_t pn = task % panels, ch = task / panels;
      const int64_t m0 = ch * row_chunk, m1 = std::min(M, m0 + row_chunk);
      ops_->gemm(p_, xq.data(), p_.K_pad, chunks == 1 ? 0 : m0, chunks == 1 ? M : m1, pn, pn + 1, e, scratch.data());
    });
  }

  size_t weight_bytes() const override { return p_.bytes(); }

 private:
  ScaledMMConfig c_;
  const Int8ScaledOps* ops_;
  std::string name_;
  ScaledMMWeights w_;  // scalars only (input scale / zero point); the codes live in p_
  Int8Packed p_;
};

std::optional<std::string> int8_reason(const ScaledMMConfig& c) {
  if (c.device.type != DeviceType::CPU) return "runs on CPU only";
  if (auto r = scaled_mm_common_reason(c)) return r;
  if (c.weight_type != W8Type::Int8) return fmt::format("weights are {}, not int8", w8_type_name(c.weight_type));
  if (c.weight_scale == WeightScaleKind::Block) return std::string("block weight scales are not supported");
  if (c.act == ActScheme::None || c.act == ActScheme::DynamicTokenGroup)
    return fmt::format("activations must be int8 per tensor or per token, not {}", act_scheme_name(c.act));
  if (c.K_p > kInt8MaxK)
    return fmt::format("K_p = {} exceeds {}: int32 accumulation could overflow", c.K_p, kInt8MaxK);
  return std::nullopt;
}

const ScaledMMKernelRegistrar kVnni{{
    .name = "cpu_fast_int8_vnni",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 10,
    .can_implement = [](const ScaledMMConfig& c) -> std::optional<std::string> {
      if (!int8_scaled_avx512_vnni_ops() || !cpu_features().avx512_vnni)
        return fmt::format("this CPU lacks AVX-512 VNNI (has: {})", cpu_features().describe());
      return int8_reason(c);
    },
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<Int8FastKernel>(c, int8_scaled_avx512_vnni_ops(), "cpu_fast_int8_vnni");
    },
}};

const ScaledMMKernelRegistrar kAvx2{{
    .name = "cpu_fast_int8_avx2",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 20,
    .can_implement = [](const ScaledMMConfig& c) -> std::optional<std::string> {
      if (!int8_scaled_avx2_ops() || !cpu_features().avx2_fma)
        return fmt::format("this CPU lacks AVX2 (has: {})", cpu_features().describe());
      return int8_reason(c);
    },
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<Int8FastKernel>(c, int8_scaled_avx2_ops(), "cpu_fast_int8_avx2");
    },
}};

}  // namespace
}  // namespace qlm
