// `cuda_wna16`: weight-only integer (GPTQ / AWQ / compressed-tensors) linear layers on CUDA.
// M <= kGemvMaxM: a dequantizing split-K GEMV streaming the packed codes once; larger M: the weights
// are dequantized into a scratch matrix in the activation dtype and multiplied by cuBLAS (F32
// accumulation; F32 activations in pedantic F32, never TF32).
#ifdef QLM_WITH_CUDA
#include <algorithm>
#include <climits>
#include <optional>
#include <string>

#include "cuda/context.h"
#include "cuda/cublas_check.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/linear_run_args.h"
#include "kernels/cuda/wna16_device.h"
#include "kernels/cuda/wna16_kernels.h"
#include "kernels/cuda/wna16_layout.h"
#include "kernels/mp_linear.h"

namespace qlm {
namespace {

cuda::Wna16Act act_of(DType d) {
  switch (d) {
    case DType::F16: return cuda::Wna16Act::F16;
    case DType::BF16: return cuda::Wna16Act::BF16;
    default: return cuda::Wna16Act::F32;
  }
}

cudaDataType_t cuda_type_of(DType d) {
  switch (d) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

std::optional<std::string> can_implement(const MPLinearLayerConfig& c) {
  if (c.device.type != DeviceType::CUDA) return "runs on CUDA only";
  if (c.capability < 70)
    return fmt::format("needs compute capability >= 7.0; the device has {}", c.capability == 0 ? std::string("none (unknown)") : std::to_string(c.capability));
  const int bits = c.weight_type.bits;
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    return fmt::format("weight type {} has {} bits; supported: 2, 3, 4, 8", c.weight_type.name(), bits);
  if (c.act_dtype != DType::F32 && c.act_dtype != DType::F16 && c.act_dtype != DType::BF16)
    return fmt::format("activation dtype {} is not F32, F16 or BF16", dtype_name(c.act_dtype));
  if (c.act_dtype == DType::BF16 && c.capability < 80)
    return fmt::format("BF16 activations need compute capability >= 8.0 (cuBLAS BF16 GEMM); the device has {}", c.capability);
  if (c.group_size != -1 && c.group_size <= 0) return fmt::format("group size {} is invalid", c.group_size);
  if (c.K_p <= 0 || c.N_p <= 0) return fmt::format("empty partition K_p={} N_p={}", c.K_p, c.N_p);
  // cuBLAS takes int dimensions; the dequantized scratch is K_p x N_p (padded).
  if (c.K_p > INT_MAX / 2 || c.N_p > INT_MAX / 2)
    return fmt::format("partition K_p={} N_p={} exceeds the int range of cuBLAS dimensions", c.K_p, c.N_p);
  return std::nullopt;
}

class CudaWna16Kernel final : public MPLinearKernel {
 public:
  explicit CudaWna16Kernel(const MPLinearLayerConfig& config) : cfg_(config) {}

  std::string name() const override { return "cuda_wna16"; }

  void prepare(WNA16Weights weights) override {
    if (weights.K != cfg_.K_p || weights.N != cfg_.N_p || weights.weight_type.bits != cfg_.weight_type.bits)
      fail("kernel.weights", {}, "this is a bug in the format's conversion to the standard form",
           "cuda_wna16: weights are {}-bit K={} N={}; the layer expects {}-bit K_p={} N_p={}", weights.weight_type.bits,
           weights.K, weights.N, cfg_.weight_type.bits, cfg_.K_p, cfg_.N_p);
    layout_ = upload_wna16_layout(pack_cuda_wna16(weights), cfg_.device);
    dw_ = layout_.view;
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_args(x, y, bias);
    if (!dw_.codes)
      fail("kernel.args", {}, "call prepare() before run()", "cuda_wna16: run() before the weights were prepared");
    cuda::Context& ctx = cuda::context(cfg_.device.index);
    const cuda::Wna16Act act = act_of(cfg_.act_dtype);
    const float* b = bias ? bias->data<float>() : nullptr;
    if (M <= cuda::kGemvMaxM) {
      Tensor xf = Tensor::empty({M, dw_.rows}, DType::F32, cfg_.device);
      QLM_CUDA_CHECK(cuda::launch_wna16_gather_x(x.raw_data(), act, M, dw_, xf.data<float>(), ctx.stream));
      const auto [splits, cpw] = plan_gemv(ctx.sm_count);
      Tensor partial = Tensor::empty({splits, M, dw_.N}, DType::F32, cfg_.device);
      QLM_CUDA_CHECK(cuda::launch_wna16_gemv(dw_, xf.data<float>(), static_cast<int>(M), splits, cpw,
                                             partial.data<float>(), ctx.stream));
      QLM_CUDA_CHECK(cuda::launch_wna16_reduce(partial.data<float>(), splits, M, dw_.N, b, y.raw_data(), act, ctx.stream));
      return;
    }
    // Dequantized weights [K, N_pad] row-major = column-major N_pad x K: y^T = W^T x^T in cuBLAS terms.
    Tensor wd = Tensor::empty({dw_.K, dw_.N_pad}, cfg_.act_dtype, cfg_.device);
    QLM_CUDA_CHECK(cuda::launch_wna16_dequant(dw_, wd.raw_data(), act, ctx.stream));
    if (b) QLM_CUDA_CHECK(cuda::launch_wna16_bias_rows(b, M, dw_.N, y.raw_data(), act, ctx.stream));
    const float alpha = 1.0f, beta = b ? 1.0f : 0.0f;
    const cudaDataType_t type = cuda_type_of(cfg_.act_dtype);
    const cublasComputeType_t compute =
        cfg_.act_dtype == DType::F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    QLM_CUBLAS_CHECK(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST));
    QLM_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(dw_.N), static_cast<int>(M),
                                  static_cast<int>(dw_.K), &alpha, wd.raw_data(), type, static_cast<int>(dw_.N_pad),
                                  x.raw_data(), type, static_cast<int>(dw_.K), &beta, y.raw_data(), type,
                                  static_cast<int>(dw_.N), compute, CUBLAS_GEMM_DEFAULT));
  }

  size_t weight_bytes() const override { return layout_.weight_bytes(); }

 private:
  // Checks x [M, K_p], y [M, N_p] (contiguous, act dtype) and bias F32 [N_p], all on the layer's
  // device; returns M.
  int64_t check_args(const Tensor& x, const Tensor& y, const Tensor* bias) const {
    return cuda::check_linear_run_args({"cuda_wna16", cfg_.device, cfg_.act_dtype, cfg_.K_p, cfg_.N_p, INT_MAX}, x, y, bias);
  }

  // Split-K for the GEMV: about 4 blocks of kGemvWarps warps per SM over all column tiles, every
  // warp at least 2 chunks; returns {splits, chunks per warp} with no empty trailing split.
  std::pair<int, int64_t> plan_gemv(int sm_count) const {
    const int64_t tiles = (dw_.N_pad + cuda::kGemvColumns - 1) / cuda::kGemvColumns;
    const int64_t target_blocks = std::max(1, sm_count) * int64_t{4};
    const int64_t max_splits = std::max<int64_t>(1, dw_.chunks / (cuda::kGemvWarps * 2));
    int64_t splits = std::clamp<int64_t>((target_blocks + tiles - 1) / tiles, 1, std::min<int64_t>(max_splits, 65535));
    const int64_t cpw = (dw_.chunks + splits * cuda::kGemvWarps - 1) / (splits * cuda::kGemvWarps);
    splits = (dw_.chunks + cpw * cuda::kGemvWarps - 1) / (cpw * cuda::kGemvWarps);
    return {static_cast<int>(splits), cpw};
  }

  MPLinearLayerConfig cfg_;
  Wna16DeviceLayout layout_;  // on cfg_.device
  cuda::Wna16DeviceWeights dw_;
};

const MPKernelRegistrar kRegisterCudaWna16{{
    .name = "cuda_wna16",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 50,
    .can_implement = can_implement,
    .create = [](const MPLinearLayerConfig& c) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<CudaWna16Kernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
