// `cpu_fast_fp8`: FP8 e4m3 weights on the cpu_fast dense GEMM. e4m3 codes convert exactly to bf16
// (4 significant bits, exponents 2^-9 .. 2^8), and so do e4m3-quantized activations, so with
// per-tensor / per-channel scales the GEMM runs on the unscaled codes and both scales multiply the
// f32 result: products are exact, only the f32 accumulation rounds. Block scales vary along K, so
// they are folded into f32 weights (one rounding per weight; bf16 where every folded weight is exact
// in bf16) and the per-group activation scales into the activations.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "core/float_convert.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

class Fp8FastKernel final : public ScaledMMKernel {
 public:
  Fp8FastKernel(const ScaledMMConfig& c, const CpuFastOps* ops) : c_(c), ops_(ops) {}
  std::string name() const override { return "cpu_fast_fp8"; }

  void prepare(ScaledMMWeights w) override {
    check_scaled_mm_weights(c_, w);
    const int64_t N = w.N, K = w.K;
    auto codes = w.codes.span<uint8_t>();
    block_ = c_.weight_scale == WeightScaleKind::Block;
    // Every e4m3 value is exact in bf16 and f32: one table of the 256 codes, rows converted in parallel.
    std::array<float, 256> value;
    for (int c = 0; c < 256; ++c) value[static_cast<size_t>(c)] = e4m3_to_f32(static_cast<uint8_t>(c));
    if (!block_) {
      Tensor bf = Tensor::empty({N, K}, DType::BF16);
      uint16_t* out = bf.data<uint16_t>();
      std::array<uint16_t, 256> bits;
      for (size_t c = 0; c < 256; ++c) bits[c] = static_cast<uint16_t>(f32_bits(value[c]) >> 16);
      compute_pool().parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
        for (int64_t i = n0 * K; i < n1 * K; ++i) out[i] = bits[codes[static_cast<size_t>(i)]];
      });
      packed_ = pack_dense(bf);
      col_scale_.resize(static_cast<size_t>(N));
      const float* s = w.weight_scale.data<float>();
      for (int64_t n = 0; n < N; ++n)
        col_scale_[static_cast<size_t>(n)] = c_.weight_scale == WeightScaleKind::Tensor ? s[0] : s[n];
    } else {
      Tensor f = Tensor::empty({N, K}, DType::F32);
      auto out = f.span<float>();
      const float* s = w.weight_scale.data<float>();
      const int64_t cols = w.weight_scale.size(1);
      std::atomic<bool> bf16_exact = true;
      compute_pool().parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
        uint32_t low_bits = 0;
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t k = 0; k < K; ++k) {
            const float v = value[codes[n * K + k]] * s[n * cols + (k + w.k_phase) / w.block_k];
            out[n * K + k] = v;
            low_bits |= f32_bits(v) & 0xFFFFu;
          }
        if (low_bits != 0) bf16_exact.store(false, std::memory_order_relaxed);
      });
      // Scales that keep every product exact in bf16 (powers of two: MXFP4's e8m0, FP8 block scales of 2^k)
      // stream at 2 bytes a weight, with the same values.
      packed_ = pack_dense(bf16_exact.load() ? f.to(DType::BF16) : f);
    }
    scalars_.K = K;
    scalars_.N = N;
    scalars_.k_phase = w.k_phase;
    scalars_.block_k = w.block_k;
    scalars_.input_scale = w.input_scale;
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t K = c_.K_p, N = c_.N_p;
    const int64_t M = check_linear_args("cpu_fast_fp8", x, y, bias, K, N);
    if (M == 0) return;
    ThreadPool& pool = compute_pool();
    float* yp = y.data<float>();
    const float* b = bias ? bias->data<float>() : nullptr;
    if (c_.act == ActScheme::None) {
      ops_->dense(packed_, x.data<float>(), M, yp, block_ ? b : nullptr, pool);
      if (!block_) scale_rows(yp, M, nullptr, b, pool);
      return;
    }
    std::vector<float> xq(static_cast<size_t>(M * K));
    ActScales s = quantize_acts_fp8(c_, scalars_, x.data<float>(), M, xq.data(), K, &pool);
    if (block_) {
      const int64_t group = c_.act == ActScheme::DynamicTokenGroup ? c_.act_group : K;
      const int64_t phase = c_.act == ActScheme::DynamicTokenGroup ? scalars_.k_phase % group : 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) xq[m * K + k] *= s.scale[m * s.groups + (k + phase) / group];
      ops_->dense(packed_, xq.data(), M, yp, b, pool);
      return;
    }
    ops_->dense(packed_, xq.data(), M, yp, nullptr, pool);
    scale_rows(yp, M, s.scale.data(), b, pool);
  }

  size_t weight_bytes() const override { return packed_.weight_bytes(); }

 private:
  // y[m, n] = y[m, n] * row[m] * col_scale[n] + bias[n]; row null means 1.
  void scale_rows(float* y, int64_t M, const float* row, const float* bias, ThreadPool& pool) const {
    const int64_t N = c_.N_p;
    pool.parallel_for(0, M, 16, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const float r = row ? row[m] : 1.0f;
        float* ym = y + m * N;
        for (int64_t n = 0; n < N; ++n)
          ym[n] = ym[n] * r * col_scale_[static_cast<size_t>(n)] + (bias ? bias[n] : 0.0f);
      }
    });
  }

  ScaledMMConfig c_;
  const CpuFastOps* ops_;
  bool block_ = false;
  PackedDense packed_;
  std::vector<float> col_scale_;
  ScaledMMWeights scalars_;  // shapes, phase and input scale; no tensors
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cpu_fast_fp8",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 10,
    .can_implement = [](const ScaledMMConfig& c) -> std::optional<std::string> {
      if (c.device.type != DeviceType::CPU) return "runs on CPU only";
      if (!cpu_features().avx2_fma)
        return fmt::format("this CPU lacks AVX2 + FMA + F16C (has: {})", cpu_features().describe());
      if (auto r = scaled_mm_common_reason(c)) return r;
      if (c.weight_type != W8Type::Fp8E4M3) return fmt::format("weights are {}, not fp8", w8_type_name(c.weight_type));
      if (!c.act_symmetric) return std::string("FP8 activations are symmetric");
      if (c.act == ActScheme::DynamicTokenGroup && c.weight_scale != WeightScaleKind::Block)
        return std::string("per-token-group activations go with block weight scales");
      return std::nullopt;
    },
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<Fp8FastKernel>(c, cpu_features().avx512 ? cpu_fast_avx512_ops() : cpu_fast_avx2_ops());
    },
}};

}  // namespace
}  // namespace qlm
