// `cuda_scaled_mm_int8_lt`: INT8 W8A8 through cuBLASLt's int8 GEMM with int32 accumulation and our epilogue
// (int8_lt_gemm.h): the same arithmetic as cpu_ref, so F32 results match it exactly.
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <memory>

#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/int8_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

std::optional<std::string> int8_lt_reason(const ScaledMMConfig& c) {
  if (auto r = cuda_scaled_mm_base_reason(c, 75, "INT8 tensor cores in cuBLASLt")) return r;
  if (c.weight_type != W8Type::Int8) return std::string("INT8 weights only (FP8: cuda_scaled_mm_fp8_lt)");
  if (c.act == ActScheme::None) return std::string("needs INT8 activations (W8A16 runs on cuda_scaled_mm_simple)");
  // IMMA GEMMs in the regular (column) order: TN only, leading dimensions multiples of 4.
  if (c.K_p % 4 != 0 || c.N_p % 4 != 0)
    return fmt::format("cuBLASLt INT8 needs K_p and N_p multiples of 4; K_p={} N_p={}", c.K_p, c.N_p);
  if (c.K_p > kInt8LtMaxK) return fmt::format("int32 accumulation holds K_p <= {}; K_p is {}", kInt8LtMaxK, c.K_p);
  return std::nullopt;
}

class ScaledMMInt8LtKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMInt8LtKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_int8_lt"; }

  void prepare(ScaledMMWeights w) override {
    w_ = upload_scaled_mm_weights(c_, w);
    gemm_ = std::make_unique<Int8LtGemm>(c_, "int8 scaled-mm");
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_scaled_mm_int8_lt", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    QLM_CHECK(gemm_ != nullptr);
    gemm_->run(w_, quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, 0, x), M, y, bias);
  }

  size_t weight_bytes() const override { return w_.bytes(); }

 private:
  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
  std::unique_ptr<Int8LtGemm> gemm_;
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
