// `cuda_scaled_mm_fp8_fast`: FP8 e4m3 W8A8 (tensor or channel weight scales; static / dynamic
// per-tensor or dynamic per-token activations) tuned for decoding-sized M, tried before
// cuda_scaled_mm_fp8_lt.
//
// Run-time rule: M <= max_m (16; QLM_FP8_FAST_MAX_M overrides it, read in prepare) runs our
// weight-streaming tensor-core kernel (scaled_mm_fp8_fast_kernels.h): activation quantizer, then
// one GEMM launch over an N x K-slice grid (and a reduction kernel when K is split); at one token
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

#include <cstdint>
#include <memory>

#include "core/env_switch.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/fp8_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"
#include "kernels/cuda/w8a8_cutlass_path.h"
#include "kernels/cuda/w8a8_stream_gemm.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

constexpr int64_t kDefaultMaxM = 16;

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

class ScaledMMFp8FastKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMFp8FastKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_fp8_fast"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    // The streaming GEMM (QLM_FP8_FAST_MAX_M, QLM_FP8_FAST_SPLITS, QLM_FP8_FAST_PDL, QLM_FP8_FUSED_QUANT_MAX_M:
    // w8a8_stream_gemm.h).
    stream_ = std::make_unique<W8A8StreamGemm>(c_, /*int8=*/false, "QLM_FP8", kDefaultMaxM);
    pdl_ = stream_->pdl();
    // The quantizer is launched for programmatic dependent launch too (its launch overlaps the previous kernel's
    // tail: -0.4 to -0.6 µs per call at 16 tokens, neutral at 256 / 1024; docs/fp8-kernel-notes.md, session 30);
    // QLM_FP8_QUANT_PDL=0 launches it in plain stream order.
    quant_pdl_ = pdl_ && env_switch_on("QLM_FP8_QUANT_PDL");
    // cuBLASLt for large M on the same weight copy; its per-row weight scales serve CUTLASS too.
    lt_ = std::make_unique<Fp8OuterVecLtGemm>(c_, w, w_, /*outer_vec=*/true,
                                              "fp8 scaled-mm (cuda_scaled_mm_fp8_fast, large M)");
    // The CUTLASS GEMM's set-up overlaps the quantizer's tail (QLM_FP8_CUTLASS_CONFIG, QLM_FP8_PROMOTION:
    // w8a8_cutlass_path.h).
    cutlass_ = std::make_unique<W8A8CutlassPath>(c_, /*int8=*/false, "QLM_FP8", lt_->row_scales(), pdl_);
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M =
        check_cuda_linear_args("cuda_scaled_mm_fp8_fast", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    if (stream_->try_run_quantizing(w_, x, M, y, bias)) return;  // one launch: the GEMM encodes x itself
    const CudaActCodes q = quantize(x);
    if (stream_->serves(M))
      stream_->run(w_, q, M, y, bias);
    else if (!cutlass_->run(w_, q, M, y, bias))
      lt_->run(w_, q, M, y, bias);
  }

  std::string path(int64_t M) const override {
    if (stream_->serves(M)) return stream_->path(M);
    return cutlass_->path(M).value_or("cublaslt");
  }

  size_t weight_bytes() const override { return w_.bytes() + lt_->extra_bytes(); }

 private:
  // Per-token scales through our vectorised quantizer, per-tensor ones through the shared one.
  CudaActCodes quantize(const Tensor& x) const {
    if (c_.act == ActScheme::DynamicToken) return quantize_acts_per_token_cuda(c_, x, quant_pdl_);
    return quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
  }

  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<W8A8StreamGemm> stream_;  // M within its bound
  bool pdl_ = false;
  bool quant_pdl_ = false;                    // the per-token quantizer launched for programmatic dependent launch
  std::unique_ptr<Fp8OuterVecLtGemm> lt_;     // large M where CUTLASS does not run
  std::unique_ptr<W8A8CutlassPath> cutlass_;  // large M on sm_90
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
