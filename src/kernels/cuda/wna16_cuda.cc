// `cuda_wna16`: weight-only integer (GPTQ / AWQ / compressed-tensors) linear layers on CUDA.
// M <= kGemvMaxM: a dequantizing split-K GEMV streaming the packed codes once; larger M: the weights
// are dequantized into a scratch matrix in the activation dtype and multiplied by cuBLAS
// (run_wna16_linear, wna16_device.h).
#ifdef QLM_WITH_CUDA
#include <climits>
#include <optional>
#include <string>

#include "kernels/cuda/linear_run_args.h"
#include "kernels/cuda/wna16_device.h"
#include "kernels/cuda/wna16_kernels.h"
#include "kernels/cuda/wna16_layout.h"
#include "kernels/mp_linear.h"

namespace qlm {
namespace {

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
    check_args(x, y, bias);
    if (!dw_.codes)
      fail("kernel.args", {}, "call prepare() before run()", "cuda_wna16: run() before the weights were prepared");
    run_wna16_linear(dw_, cfg_.act_dtype, x, y, bias ? bias->data<float>() : nullptr, cfg_.device);
  }

  size_t weight_bytes() const override { return layout_.weight_bytes(); }
  std::string path(int64_t M) const override { return M <= cuda::kGemvMaxM ? "gemv" : "dequant+cublas"; }

 private:
  // Checks x [M, K_p], y [M, N_p] (contiguous, act dtype) and bias F32 [N_p], all on the layer's
  // device; returns M.
  int64_t check_args(const Tensor& x, const Tensor& y, const Tensor* bias) const {
    return cuda::check_linear_run_args({"cuda_wna16", cfg_.device, cfg_.act_dtype, cfg_.K_p, cfg_.N_p, INT_MAX}, x, y, bias);
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
