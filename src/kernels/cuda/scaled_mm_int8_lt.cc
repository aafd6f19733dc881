// `cuda_scaled_mm_int8_lt`: INT8 W8A8 through cuBLASLt's int8 GEMM with int32 accumulation
// (IMMA tensor cores), then our epilogue kernel: zero-point correction through the weight column
// sums (sum_k (q_x - z) q_w = sum_k q_x q_w - z * sum_k q_w, exact in int64), the row × column
// scales in double and the bias — the same arithmetic as cpu_ref, so F32 results match it exactly.
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <memory>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_epilogue.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

// cuBLASLt accumulates q_x * q_w in int32: |q_x|, |q_w| <= 128.
constexpr int64_t kMaxK = 131072;

std::optional<std::string> int8_lt_reason(const ScaledMMConfig& c) {
  if (auto r = cuda_scaled_mm_base_reason(c, 75, "INT8 tensor cores in cuBLASLt")) return r;
  if (c.weight_type != W8Type::Int8) return std::string("INT8 weights only (FP8: cuda_scaled_mm_fp8_lt)");
  if (c.act == ActScheme::None) return std::string("needs INT8 activations (W8A16 runs on cuda_scaled_mm_simple)");
  // IMMA GEMMs in the regular (column) order: TN only, leading dimensions multiples of 4.
  if (c.K_p % 4 != 0 || c.N_p % 4 != 0)
    return fmt::format("cuBLASLt INT8 needs K_p and N_p multiples of 4; K_p={} N_p={}", c.K_p, c.N_p);
  if (c.K_p > kMaxK)
    return fmt::format("int32 accumulation holds K_p <= {}; K_p is {}", kMaxK, c.K_p);
  return std::nullopt;
}

class ScaledMMInt8LtKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMInt8LtKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_int8_lt"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    cuda::LtGemmSpec spec;
    spec.a_type = spec.b_type = CUDA_R_8I;
    spec.d_type = CUDA_R_32I;
    spec.compute = CUBLAS_COMPUTE_32I;
    spec.scale_type = CUDA_R_32I;
    spec.N = c_.N_p;
    spec.K = c_.K_p;
    spec.what = "int8 scaled-mm";
    gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_scaled_mm_int8_lt", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    QLM_CHECK(gemm_ != nullptr);
    cuda::Context& ctx = cuda::context(c_.device.index);
    const CudaActCodes q = quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x);
    Tensor acc = Tensor::empty({M, c_.N_p}, DType::I32, c_.device);
    gemm_->run(w_.codes.raw_data(), q.codes.raw_data(), acc.raw_data(), M, nullptr, nullptr, nullptr);
    cuda::EpilogueArgs e;
    e.acc = acc.raw_data();
    e.acc_type = cuda::kAccI32;
    e.y = y.raw_data();
    e.y_type = cuda_float_type(c_.act_dtype);
    e.M = M;
    e.N = c_.N_p;
    e.row_scale = q.scales.data<float>();
    e.row_scale_stride = 1;
    e.col_scale = w_.scales.data<float>();
    e.col_scale_stride = c_.weight_scale == WeightScaleKind::Channel ? 1 : 0;
    if (!c_.act_symmetric) {
      e.row_zero = q.zeros.data<int32_t>();
      e.col_sum = w_.col_sums.data<int32_t>();
    }
    e.bias = bias ? bias->data<float>() : nullptr;
    QLM_CUDA_CHECK(cuda::launch_epilogue(e, ctx.stream));
  }

  size_t weight_bytes() const override { return w_.bytes(); }

 private:
  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<cuda::LtGemm> gemm_;
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cuda_scaled_mm_int8_lt",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 20,
    .can_implement = int8_lt_reason,
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMInt8LtKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
