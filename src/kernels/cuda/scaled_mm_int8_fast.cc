// `cuda_scaled_mm_int8_fast`: INT8 W8A8 (tensor or channel weight scales; symmetric static / dynamic per-tensor or
// dynamic per-token activations) for decoding-sized M, tried before cuda_scaled_mm_int8_lt.
//
// Run-time rule: M <= max_m (16; QLM_INT8_FAST_MAX_M overrides it, read in prepare) runs the weight-streaming
// tensor-core GEMM that serves FP8 too (w8a8_stream_gemm.h; mma.sync m16n8k32 s8 with exact int32 sums): at one
// token with per-token scales it quantizes the activations itself, otherwise after a quantizer (per-token scales:
// FP8's vectorised one, launch_w8a8_quant_token; static or per-tensor ones: act_quant.cu's).
// Larger M, where the GEMM turns compute-bound, runs after the quantizer the CUTLASS TMA + wgmma GEMM with INT8
// codes (exact int32 sums; the scales and bias in its epilogue; sm_90 exactly, BF16 / F16 output, when CUTLASS was
// compiled in; FP8's tiles where FP8 takes CUTLASS, 64-token tiles up to 128 tokens, 128 x 128 tiles in 2-CTA
// clusters where FP8 leaves larger M to cuBLASLt, or QLM_INT8_CUTLASS_CONFIG=<name>|off: w8a8_cutlass_path.h), else
// (other GPUs, F32) cuBLASLt's INT8 GEMM and our epilogue on the same weight copy (int8_lt_gemm.h,
// cuda_scaled_mm_int8_lt's recipe). On an H100 the CUTLASS path took 0.47-1.01x cuBLASLt's time from 17 to 1024 tokens
// on the Llama-3 8B / 70B layers, 0.47-0.90x at 256 and 1024 (docs/fp8-kernel-notes.md, session 50). Why the streaming
// kernel: on an H100 it took 10.9-165 µs at one token on the Llama-3 8B / 70B layers where cuBLASLt's INT8 GEMM
// took 17.4-216 (1.3-2.3x), and was ahead or even up to 16 tokens (docs/fp8-kernel-notes.md, session 49). Shapes: K_p a
// multiple of 256, N_p of 16; asymmetric activations (zero points) stay with cuda_scaled_mm_int8_lt.
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <cstdint>
#include <memory>

#include "core/env_switch.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/int8_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"
#include "kernels/cuda/w8a8_cutlass_path.h"
#include "kernels/cuda/w8a8_stream_gemm.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

constexpr int64_t kDefaultMaxM = 16;

std::optional<std::string> int8_fast_reason(const ScaledMMConfig& c) {
  if (auto r = cuda_scaled_mm_base_reason(c, 80, "INT8 mma.sync m16n8k32")) return r;
  if (c.weight_type != W8Type::Int8) return std::string("INT8 weights only (FP8: cuda_scaled_mm_fp8_fast)");
  if (c.weight_scale != WeightScaleKind::Tensor && c.weight_scale != WeightScaleKind::Channel)
    return fmt::format("weight scales must be per tensor or per channel, not {}",
                       weight_scale_kind_name(c.weight_scale));
  if (c.act != ActScheme::StaticTensor && c.act != ActScheme::DynamicTensor && c.act != ActScheme::DynamicToken)
    return fmt::format("activations must be quantized per tensor or per token, not {}", act_scheme_name(c.act));
  if (!c.act_symmetric)
    return std::string("symmetric activations only (zero points: cuda_scaled_mm_int8_lt corrects for them)");
  if (c.act_dtype != DType::BF16 && c.act_dtype != DType::F16 && c.act_dtype != DType::F32)
    return fmt::format("activations must be BF16, F16 or F32, not {}", dtype_name(c.act_dtype));
  if (c.K_p % cuda::kFp8FastStepK != 0 || c.N_p % 16 != 0)
    return fmt::format("needs K_p a multiple of {} and N_p a multiple of 16; K_p={} N_p={}", cuda::kFp8FastStepK, c.K_p,
                       c.N_p);
  if (c.K_p > kInt8LtMaxK) return fmt::format("int32 accumulation holds K_p <= {}; K_p is {}", kInt8LtMaxK, c.K_p);
  return std::nullopt;
}

class ScaledMMInt8FastKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMInt8FastKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_int8_fast"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    // QLM_INT8_FAST_MAX_M, QLM_INT8_FAST_SPLITS, QLM_INT8_FAST_PDL, ...: w8a8_stream_gemm.h.
    stream_ = std::make_unique<W8A8StreamGemm>(c_, /*int8=*/true, "QLM_INT8", kDefaultMaxM);
    // Per-token scales through the vectorised quantizer FP8 uses, launched for programmatic dependent launch like
    // FP8's (QLM_INT8_QUANT_PDL=0: plain stream order). act_quant.cu's quantizer, which this path used until
    // session 52, then waited for each element's load in turn: INT8 took up to 47 µs more than FP8 on the same GEMM
    // (70b.down at 64 tokens, H200; docs/fp8-kernel-notes.md, session 52). QLM_INT8_VEC_QUANT=0 takes act_quant.cu's
    // (now batched) quantizer instead: the same codes, for measuring the difference.
    quant_pdl_ = stream_->pdl() && env_switch_on("QLM_INT8_QUANT_PDL");
    vec_quant_ = env_switch_on("QLM_INT8_VEC_QUANT");
    lt_ = std::make_unique<Int8LtGemm>(c_, "int8 scaled-mm (cuda_scaled_mm_int8_fast, large M)");
    if (W8A8CutlassPath::runs_on(c_)) row_scales_ = weight_row_scales(c_, w, w_);
    cutlass_ = std::make_unique<W8A8CutlassPath>(c_, /*int8=*/true, "QLM_INT8", row_scales_, stream_->pdl());
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M =
        check_cuda_linear_args("cuda_scaled_mm_int8_fast", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
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

  // The weights, plus the per-tensor weight scale repeated per row for the CUTLASS epilogue (where it runs).
  size_t weight_bytes() const override {
    return w_.bytes() +
           (row_scales_.defined() && c_.weight_scale == WeightScaleKind::Tensor ? row_scales_.nbytes() : 0);
  }

 private:
  // Per-token scales through the vectorised quantizer, static and per-tensor ones through the shared one. Symmetric
  // codes: no zero points (the large-M paths read none).
  CudaActCodes quantize(const Tensor& x) const {
    if (c_.act == ActScheme::DynamicToken && vec_quant_) return quantize_acts_per_token_cuda(c_, x, quant_pdl_);
    return quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
  }

  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<W8A8StreamGemm> stream_;  // M within its bound
  bool quant_pdl_ = false;                  // the per-token quantizer launched for programmatic dependent launch
  bool vec_quant_ = true;                   // per-token scales through launch_w8a8_quant_token
  Tensor row_scales_;  // F32 [N_p] weight scales, one per row (weight_row_scales), where CUTLASS runs
  std::unique_ptr<W8A8CutlassPath> cutlass_;  // larger M on sm_90, where its rule takes M
  std::unique_ptr<Int8LtGemm> lt_;            // larger M otherwise
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cuda_scaled_mm_int8_fast",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 5,
    .can_implement = int8_fast_reason,
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMInt8FastKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
