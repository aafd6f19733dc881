// `cuda_scaled_mm_simple`: every scaled-mm configuration on any CUDA GPU qlm builds for (the
// fallback behind the cuBLASLt kernels): GPU activation quantizer, then one tiled GEMM kernel with
// the scales, zero points and bias fused (kernels/cuda/scaled_mm_simple_gemm.h).
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_simple_gemm.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

// INT8 W8A8 accumulates (q_x - z_x) * q_w in int32: |q_x - z_x| <= 255, |q_w| <= 128.
constexpr int64_t kMaxInt8K = 65536;

std::optional<std::string> simple_reason(const ScaledMMConfig& c) {
  // CUDA 13 builds no code for older GPUs.
  if (auto r = cuda_scaled_mm_base_reason(c, 75, "the oldest GPU CUDA 13 supports")) return r;
  if (c.weight_type == W8Type::Int8 && c.act != ActScheme::None && c.K_p > kMaxInt8K)
    return fmt::format("INT8 W8A8 accumulates in int32, which holds K_p <= {}; K_p is {}", kMaxInt8K, c.K_p);
  return std::nullopt;
}

class ScaledMMSimpleKernel final : public ScaledMMKernel {
 public:
  explicit ScaledMMSimpleKernel(const ScaledMMConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_scaled_mm_simple"; }

  void prepare(ScaledMMWeights w) override { w_ = upload_scaled_mm_weights(c_, w); }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_scaled_mm_simple", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    cuda::Context& ctx = cuda::context(c_.device.index);
    cuda::SimpleMMArgs a;
    a.M = M;
    a.N = c_.N_p;
    a.K = c_.K_p;
    a.act_type = cuda_float_type(c_.act_dtype);
    CudaActCodes q;
    if (c_.act == ActScheme::None) {
      a.x = x.raw_data();
    } else {
      q = quantize_acts_cuda(c_, w_.input_scale, w_.input_zero_point, w_.k_phase, x);
      a.act_codes = q.codes.raw_data();
      a.act_scales = q.scales.data<float>();
      a.act_groups = q.groups;
      a.act_group = q.group;
      a.act_phase = q.phase;
      a.act_zeros = c_.weight_type == W8Type::Int8 ? q.zeros.data<int32_t>() : nullptr;
    }
    a.w_codes = w_.codes.raw_data();
    a.fp8 = c_.weight_type == W8Type::Fp8E4M3;
    a.w_scales = w_.scales.data<float>();
    a.w_scale_kind = c_.weight_scale == WeightScaleKind::Tensor    ? cuda::kWeightTensor
                     : c_.weight_scale == WeightScaleKind::Channel ? cuda::kWeightChannel
                                                                   : cuda::kWeightBlock;
    a.w_scale_cols = w_.scale_cols;
    a.w_block_k = w_.block_k;
    a.w_phase = w_.k_phase;
    a.bias = bias ? bias->data<float>() : nullptr;
    a.y = y.raw_data();
    QLM_CUDA_CHECK(cuda::launch_scaled_mm_simple(a, ctx.stream));
  }

  size_t weight_bytes() const override { return w_.bytes(); }

 private:
  ScaledMMConfig c_;
  CudaScaledMMWeights w_;
};

const ScaledMMKernelRegistrar kRegister{{
    .name = "cuda_scaled_mm_simple",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 50,
    .can_implement = simple_reason,
    .create = [](const ScaledMMConfig& c) -> std::unique_ptr<ScaledMMKernel> {
      return std::make_unique<ScaledMMSimpleKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
