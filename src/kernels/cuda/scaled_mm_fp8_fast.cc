// `cuda_scaled_mm_fp8_fast`: FP8 e4m3 W8A8 (tensor or channel weight scales; static / dynamic
// per-tensor or dynamic per-token activations) tuned for decoding-sized M, tried before
// cuda_scaled_mm_fp8_lt.
//
// Run-time rule: M <= max_m (16; QLM_FP8_FAST_MAX_M overrides it, read in prepare) runs our
// weight-streaming tensor-core kernel (scaled_mm_fp8_fast_kernels.h): activation quantizer, then
// one GEMM launch over an N x K-slice grid (its last block per column block sums the K split); at one token
// with per-token scales the GEMM quantizes the activations itself (one launch, the same codes). Larger M,
// where the GEMM turns compute-bound, runs after our vectorised quantizer either a CUTLASS
// TMA + wgmma GEMM with the scales and bias in its epilogue (sm_90 exactly, BF16/F16 output, when
// CUTLASS was compiled in; tile configuration per M by fp8_cutlass_config_for, or
// QLM_FP8_CUTLASS_CONFIG=<name>|off) or else the cuBLASLt FP8 GEMM with outer-vector scales on the
// same weight copy (as cuda_scaled_mm_fp8_lt does). Shapes: K_p a multiple of 256, N_p of 16.
// Why 16: mma.sync e4m3 on the H200 measured about 170 TFLOP/s in this kernel (64 tokens,
// 8192x57344: 349 us), so past 16 tokens the kernel is bound by MMA issue, not by the weight
// stream; at 32 tokens it was already slower than cuBLASLt at 64 on every Llama shape measured
// (docs/fp8-kernel-notes.md).
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/env_switch.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/fp8_cutlass_gemm.h"
#include "kernels/cuda/fp8_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"
#include "kernels/cuda/w8a8_stream_gemm.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

constexpr int64_t kDefaultMaxM = 16;
// CUTLASS FP32 promotion every 4 wgmma k-steps (every 128-k tile, CUTLASS's default) for a
// configuration forced by QLM_FP8_CUTLASS_CONFIG.
constexpr int kPromotionInterval = 4;

std::optional<std::string> fp8_fast_reason(const ScaledMMConfig& c) {
  if (auto r = cuda_scaled_mm_base_reason(c, 89, "FP8 e4m3 mma.sync")) return r;
  if (c.weight_type != W8Type::Fp8E4M3) return std::string("FP8 e4m3 weights only");
  if (c.weight_scale != WeightScaleKind::Tensor && c.weight_scale != WeightScaleKind::Channel)
    return fmt::format("weight scales must be per tensor or per channel, not {}",
                       weight_scale_kind_name(c.weight_scale));
  if (c.act != ActScheme::StaticTensor && c.act != ActScheme::DynamicTensor && c.act != ActScheme::DynamicToken)
    return fmt::format("activations must be quantized per tensor or per token, not {}", act_scheme_name(c.act));
  if (c.act_dtype != DType::BF16 && c.act_dtype != DType::F16 && c.act_dtype != DType::F32)
    return fmt::format("activations must be BF16, F16 or F32, not {}", dtype_name(c.act_dtype));
  if (c.K_p % cuda::kFp8FastStepK != 0 || c.N_p % 16 != 0)
    return fmt::format("needs K_p a multiple of {} and N_p a multiple of 16; K_p={} N_p={}", cuda::kFp8FastStepK, c.K_p,
                       c.N_p);
  return std::nullopt;
}

// The CUTLASS configuration (and FP32 promotion interval) for M tokens (M > 16) on an N-row layer,
// or none (cuBLASLt runs), from the H200 sweeps of scripts/bench_fp8_configs.sh
// (docs/fp8-kernel-notes.md). Up to 64 tokens CUTLASS always (1.0-1.45x torch there): 32-token
// tiles up to 32 tokens and while 64-token ones would leave most SMs idle, 64-token tiles up to 64
// and above while their tiles fit well inside one wave. Above 128 tokens, 64 x 128 tiles in 2-CTA
// clusters, promoting every 16 k-steps, while their tiles fit in one wave (narrow layers: 1.2-1.3x
// cuBLASLt at 256 tokens on N = 4096); otherwise cuBLASLt (every larger tile measured within 2 % of
// it at best).
struct Fp8CutlassChoice {
  cuda::Fp8CutlassConfig config;
  int promotion_interval;
};
std::optional<Fp8CutlassChoice> fp8_cutlass_config_for(int64_t M, int64_t N, int sm_count) {
  using C = cuda::Fp8CutlassConfig;
  const int64_t tiles = (N + 127) / 128 * ((M + 63) / 64);
  if (M <= 32 || (M <= 64 && 8 * tiles <= 3 * sm_count)) return Fp8CutlassChoice{C::kSwap128x32, 4};
  if (M <= 64 || 4 * tiles <= 3 * sm_count) return Fp8CutlassChoice{C::kSwap128x64, 4};
  if (M > 128 && (N + 63) / 64 * ((M + 127) / 128) <= sm_count) return Fp8CutlassChoice{C::kSwap64x128C12, 16};
  return std::nullopt;
}

class ScaledMMFp8FastKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMFp8FastKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_fp8_fast"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    // The streaming GEMM (QLM_FP8_FAST_MAX_M, QLM_FP8_FAST_SPLITS, QLM_FP8_FAST_PDL, QLM_FP8_FUSED_QUANT_MAX_M,
    // QLM_FP8_FAST_FIXUP: w8a8_stream_gemm.h).
    stream_ = std::make_unique<W8A8StreamGemm>(c_, /*int8=*/false, "QLM_FP8", kDefaultMaxM);
    pdl_ = stream_->pdl();
    // The quantizer is launched for programmatic dependent launch too (its launch overlaps the previous kernel's
    // tail: -0.4 to -0.6 µs per call at 16 tokens, neutral at 256 / 1024; docs/fp8-kernel-notes.md, session 30);
    // QLM_FP8_QUANT_PDL=0 launches it in plain stream order.
    quant_pdl_ = pdl_ && env_switch_on("QLM_FP8_QUANT_PDL");
    // CUTLASS's kernels are built for sm_90a, which runs on compute capability 9.0 only.
    use_cutlass_ = cuda::fp8_cutlass_available() && c_.capability == 90 && c_.act_dtype != DType::F32;
    if (const char* env = std::getenv("QLM_FP8_CUTLASS_CONFIG")) {
      const std::string want(env);
      if (want == "off") use_cutlass_ = false;
      for (int i = 0; i < static_cast<int>(cuda::Fp8CutlassConfig::kCount); ++i)
        if (want == cuda::fp8_cutlass_config_name(static_cast<cuda::Fp8CutlassConfig>(i)))
          forced_config_ = static_cast<cuda::Fp8CutlassConfig>(i);
    }
    // Tuning: QLM_FP8_PROMOTION=n promotes the CUTLASS accumulators every n wgmma k-steps (a
    // multiple of 4) whatever the configuration; unset, the rule's interval (or 4 for a forced one).
    if (const char* env = std::getenv("QLM_FP8_PROMOTION")) {
      const int n = std::atoi(env);
      if (n < 4 || n % 4 != 0)
        fail("kernel.config", {}, "set QLM_FP8_PROMOTION to a multiple of 4 (4, 8, 16, ...) or unset it",
             "QLM_FP8_PROMOTION={} is not a positive multiple of 4", env);
      forced_promotion_ = n;
    }
    // cuBLASLt for large M on the same weight copy; its per-row weight scales serve CUTLASS too.
    lt_ = std::make_unique<Fp8OuterVecLtGemm>(c_, w, w_, /*outer_vec=*/true,
                                              "fp8 scaled-mm (cuda_scaled_mm_fp8_fast, large M)");
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M =
        check_cuda_linear_args("cuda_scaled_mm_fp8_fast", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    if (stream_->try_run_quantizing(w_, x, M, y, bias)) return;  // one launch: the GEMM encodes x itself
    const CudaActCodes q = quantize(x, M);
    if (stream_->serves(M))
      stream_->run(w_, q, M, y, bias);
    else if (!run_cutlass(q, M, y, bias))
      lt_->run(w_, q, M, y, bias);
  }

  std::string path(int64_t M) const override {
    if (stream_->serves(M)) return stream_->path(M);
    if (use_cutlass_) {
      const std::optional<Fp8CutlassChoice> c = cutlass_choice(M);
      if (c)
        return fmt::format("cutlass {} p{}", cuda::fp8_cutlass_config_name(c->config),
                           forced_promotion_.value_or(c->promotion_interval));
    }
    return "cublaslt";
  }

  size_t weight_bytes() const override { return w_.bytes() + lt_->extra_bytes(); }

 private:
  // Per-token scales through our vectorised quantizer, per-tensor ones through the shared one.
  CudaActCodes quantize(const Tensor& x, int64_t M) const {
    if (c_.act != ActScheme::DynamicToken) return quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
    CudaActCodes q;
    q.group = c_.K_p;
    q.codes = Tensor::empty({M, c_.K_p}, DType::F8_E4M3, c_.device);
    q.scales = Tensor::empty({M}, DType::F32, c_.device);
    QLM_CUDA_CHECK(cuda::launch_fp8_fast_quant_token(x.raw_data(), cuda_float_type(c_.act_dtype), M, c_.K_p,
                                                     q.codes.raw_data(), q.scales.data<float>(), quant_pdl_,
                                                     cuda::context(c_.device.index).stream));
    return q;
  }

  // The CUTLASS configuration for M rows (forced or by the rule), or none: cuBLASLt.
  std::optional<Fp8CutlassChoice> cutlass_choice(int64_t M) const {
    if (forced_config_) return Fp8CutlassChoice{*forced_config_, kPromotionInterval};
    return fp8_cutlass_config_for(M, c_.N_p, cuda::context(c_.device.index).sm_count);
  }

  // False when the CUTLASS path does not apply (then cuBLASLt runs); throws on a CUDA error.
  bool run_cutlass(const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const {
    if (!use_cutlass_) return false;
    cuda::Context& ctx = cuda::context(c_.device.index);
    cuda::Fp8CutlassArgs a;
    a.x = q.codes.raw_data();
    a.w = w_.codes.raw_data();
    a.y = y.raw_data();
    a.y_f16 = c_.act_dtype == DType::F16;
    a.sx = q.scales.data<float>();
    a.sw = lt_->row_scales().data<float>();
    a.bias = bias ? bias->data<float>() : nullptr;
    a.M = M;
    a.N = c_.N_p;
    a.K = c_.K_p;
    a.sm_count = ctx.sm_count;
    a.device = c_.device.index;
    a.pdl = pdl_;  // the GEMM's set-up overlaps the quantizer's tail
    const std::optional<Fp8CutlassChoice> chosen = cutlass_choice(M);
    if (!chosen) return false;
    a.promotion_interval = forced_promotion_.value_or(chosen->promotion_interval);
    const cudaError_t e =
        cuda::fp8_cutlass_gemm(chosen->config, a, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream);
    if (e == cudaErrorNotSupported) return false;
    QLM_CUDA_CHECK(e);
    return true;
  }

  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<W8A8StreamGemm> stream_;  // M within its bound
  bool pdl_ = false;
  bool quant_pdl_ = false;               // the per-token quantizer launched for programmatic dependent launch
  std::optional<int> forced_promotion_;  // QLM_FP8_PROMOTION (tuning, tests)
  bool use_cutlass_ = false;             // large M through the CUTLASS sm_90a GEMM
  std::optional<cuda::Fp8CutlassConfig> forced_config_;  // QLM_FP8_CUTLASS_CONFIG (tuning, tests)
  std::unique_ptr<Fp8OuterVecLtGemm> lt_;                // large M where CUTLASS does not run
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cuda_scaled_mm_fp8_fast",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 5,
    .can_implement = fp8_fast_reason,
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMFp8FastKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
