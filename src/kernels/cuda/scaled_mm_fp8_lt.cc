// `cuda_scaled_mm_fp8_lt`: FP8 e4m3 W8A8 through cuBLASLt's FP8 GEMM (capability >= 89).
// The GEMM writes y in the activation dtype with the scales applied by cuBLASLt: per-tensor
// weight and activation scales as its scalar A/B scale pointers; per-token activation or
// per-channel weight scales as outer vectors (s_w[n] for the weight rows, s_x[m] for the tokens;
// cuBLAS 12.9+ documents this mode for Hopper FP8). The bias goes in cuBLASLt's epilogue where it
// takes an F32 bias, else in our epilogue kernel. When cuBLASLt offers no outer-vector algorithm
// for a shape, the GEMM writes F32 and our epilogue kernel applies s_x[m] * s_w[n] and the bias.
// QLM_CUDA_FP8_OUTER_VEC=0 (read in prepare) takes that F32 path always (tests, diagnosis).
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/fp8_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

bool tensor_scales_only(const ScaledMMConfig& c) {
  return c.weight_scale == WeightScaleKind::Tensor &&
         (c.act == ActScheme::StaticTensor || c.act == ActScheme::DynamicTensor);
}

std::optional<std::string> fp8_lt_reason(const ScaledMMConfig& c) {
  if (auto r = cuda_scaled_mm_base_reason(c, 89, "FP8 tensor cores")) return r;
  if (c.weight_type != W8Type::Fp8E4M3) return std::string("FP8 weights only (INT8: cuda_scaled_mm_int8_lt)");
  if (c.weight_scale == WeightScaleKind::Block)
    return std::string("block weight scales are not supported (cuda_scaled_mm_simple runs them)");
  if (c.act != ActScheme::StaticTensor && c.act != ActScheme::DynamicTensor && c.act != ActScheme::DynamicToken)
    return fmt::format("activations must be quantized per tensor or per token, not {}", act_scheme_name(c.act));
  // cuBLASLt FP8 GEMMs need 16-byte aligned leading dimensions (lda = ldb = K bytes, ldd = N).
  if (c.K_p % 16 != 0 || c.N_p % 16 != 0)
    return fmt::format("cuBLASLt FP8 needs K_p and N_p multiples of 16; K_p={} N_p={}", c.K_p, c.N_p);
  return std::nullopt;
}

class ScaledMMFp8LtKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMFp8LtKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_fp8_lt"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    if (tensor_scales_only(c_)) {
      scalar_gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, fp8_lt_spec(c_, "fp8 scaled-mm"));
      return;
    }
    const char* env = std::getenv("QLM_CUDA_FP8_OUTER_VEC");
    outer_gemm_ = std::make_unique<Fp8OuterVecLtGemm>(c_, w, w_, !env || std::strcmp(env, "0") != 0, "fp8 scaled-mm");
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_scaled_mm_fp8_lt", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    QLM_CHECK(scalar_gemm_ != nullptr || outer_gemm_ != nullptr);
    const CudaActCodes q = quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
    // Scalar mode: every row of q.scales holds the tensor scale, row 0 is read.
    if (scalar_gemm_)
      run_lt_gemm_with_bias(*scalar_gemm_, c_, w_, q, M, y, bias, w_.scales.data<float>(), q.scales.data<float>());
    else
      outer_gemm_->run(w_, q, M, y, bias);
  }

  size_t weight_bytes() const override { return w_.bytes() + (outer_gemm_ ? outer_gemm_->extra_bytes() : 0); }

 private:
  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<cuda::LtGemm> scalar_gemm_;      // per-tensor scales only
  std::unique_ptr<Fp8OuterVecLtGemm> outer_gemm_;  // per-token and / or per-channel scales
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cuda_scaled_mm_fp8_lt",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 10,
    .can_implement = fp8_lt_reason,
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMFp8LtKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
