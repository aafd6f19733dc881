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
#include <vector>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_epilogue.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

cudaDataType_t cuda_data_type(DType d) {
  return d == DType::F32 ? CUDA_R_32F : d == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
}

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
    cuda::LtGemmSpec spec;
    spec.a_type = spec.b_type = CUDA_R_8F_E4M3;
    spec.d_type = cuda_data_type(c_.act_dtype);
    spec.compute = CUBLAS_COMPUTE_32F;
    spec.N = c_.N_p;
    spec.K = c_.K_p;
    spec.what = "fp8 scaled-mm";
    if (tensor_scales_only(c_)) {
      gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
      return;
    }
    // One weight scale per output row for the outer-vector mode.
    row_scales_ = w_.scales;
    if (c_.weight_scale == WeightScaleKind::Tensor)
      row_scales_ = Tensor::from_vector(std::vector<float>(static_cast<size_t>(c_.N_p), w.weight_scale.data<float>()[0]),
                                        {c_.N_p})
                        .to_device(c_.device);
    const char* env = std::getenv("QLM_CUDA_FP8_OUTER_VEC");
    if (!env || std::strcmp(env, "0") != 0) {
      spec.outer_vec_scales = true;
      gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
      spec.outer_vec_scales = false;
    }
    spec.d_type = CUDA_R_32F;
    spec.what = "fp8 scaled-mm (F32 output)";
    gemm_f32_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_scaled_mm_fp8_lt", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    QLM_CHECK(gemm_ != nullptr || gemm_f32_ != nullptr);
    cuda::Context& ctx = cuda::context(c_.device.index);
    const CudaActCodes q = quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
    const float* b = bias ? bias->data<float>() : nullptr;
    cuda::EpilogueArgs e;
    e.y = y.raw_data();
    e.y_type = cuda_float_type(c_.act_dtype);
    e.M = M;
    e.N = c_.N_p;
    e.bias = b;
    // Scalar mode: every row of q.scales holds the tensor scale, row 0 is read. Outer-vector
    // mode: q.scales has one scale per token (equal ones for per-tensor activations).
    const float* a_scale = tensor_scales_only(c_) ? w_.scales.data<float>() : row_scales_.data<float>();
    const float* b_scale = q.scales.data<float>();
    if (tensor_scales_only(c_) || (gemm_ && gemm_->supported(M, b, a_scale, b_scale))) {
      if (gemm_->run(w_.codes.raw_data(), q.codes.raw_data(), y.raw_data(), M, b, a_scale, b_scale) || !b) return;
      e.acc = y.raw_data();  // bias only, in place
      e.acc_type = e.y_type;
      QLM_CUDA_CHECK(cuda::launch_epilogue(e, ctx.stream));
      return;
    }
    Tensor acc = Tensor::empty({M, c_.N_p}, DType::F32, c_.device);
    gemm_f32_->run(w_.codes.raw_data(), q.codes.raw_data(), acc.raw_data(), M, nullptr, nullptr, nullptr);
    e.acc = acc.raw_data();
    e.acc_type = cuda::kAccF32;
    e.row_scale = q.scales.data<float>();
    e.row_scale_stride = 1;
    e.col_scale = w_.scales.data<float>();
    e.col_scale_stride = c_.weight_scale == WeightScaleKind::Channel ? 1 : 0;
    QLM_CUDA_CHECK(cuda::launch_epilogue(e, ctx.stream));
  }

  size_t weight_bytes() const override {
    return w_.bytes() + (row_scales_.defined() && c_.weight_scale == WeightScaleKind::Tensor ? row_scales_.nbytes() : 0);
  }

 private:
  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  Tensor row_scales_;                      // F32 [N] weight scales (outer-vector mode)
  std::unique_ptr<cuda::LtGemm> gemm_;      // y in the activation dtype, scales applied by cuBLASLt (or null)
  std::unique_ptr<cuda::LtGemm> gemm_f32_;  // fallback: F32 output for our epilogue
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
