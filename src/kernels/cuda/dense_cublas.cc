// `cuda_cublas_dense`: unquantized linear layers through cuBLASLt. The weights are converted once
// on the host to the activation dtype and uploaded; y = x·Wᵀ (+ bias) with F32 accumulation
// (CUBLAS_COMPUTE_32F: F32 activations get true FP32 products, no TF32), the heuristic's
// algorithm with the context workspace, and the bias in cuBLASLt's epilogue where it takes an F32
// bias (else our epilogue kernel adds it). At a few rows it may run our GEMV instead (dense_gemv.h).
#ifdef QLM_WITH_CUDA
#include <fmt/format.h>

#include <memory>

#include "core/mode_switch.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "cuda/data_type.h"
#include "kernels/cuda/dense_cuda_args.h"
#include "kernels/cuda/dense_gemv.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_epilogue.h"
#include "kernels/dense_linear.h"

namespace qlm {

namespace cuda {
namespace {
ModeSwitch g_dense_gemv("QLM_DENSE_GEMV");
}  // namespace

void set_dense_gemv(int mode) { g_dense_gemv.force(mode); }

bool dense_gemv_wanted(int64_t M, int64_t N) {
  const int mode = g_dense_gemv.mode();
  if (mode == 0 || M < 1 || M > kDenseGemvMaxRows) return false;
  return mode == 1 || (kDenseGemvByDefault && N <= kDenseGemvDefaultMaxN);
}
}  // namespace cuda

namespace {

bool is_float16_32(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

std::optional<std::string> dense_reason(const DenseLinearConfig& c) {
  if (c.device.type != DeviceType::CUDA) return std::string("runs on CUDA devices only");
  if (c.capability < 75)
    return fmt::format("needs compute capability >= 75 (the oldest GPU CUDA 13 supports); the device has {}",
                       c.capability);
  if (c.act_dtype == DType::BF16 && c.capability < 80)
    return fmt::format("BF16 GEMMs need compute capability >= 80; the device has {}", c.capability);
  if (!is_float16_32(c.weight_dtype))
    return fmt::format("weight dtype {} is not F32, F16 or BF16", dtype_name(c.weight_dtype));
  if (!is_float16_32(c.act_dtype))
    return fmt::format("activation dtype {} is not F32, F16 or BF16", dtype_name(c.act_dtype));
  if (c.K_p <= 0 || c.N_p <= 0) return fmt::format("empty layer (K_p={}, N_p={})", c.K_p, c.N_p);
  return std::nullopt;
}

class DenseCublasKernel final : public DenseLinearKernel {
 public:
  explicit DenseCublasKernel(const DenseLinearConfig& c) : c_(c) {}
  std::string name() const override { return "cuda_cublas_dense"; }

  void prepare(const Tensor& weight) override {
    QLM_CHECK(weight.dim() == 2 && weight.size(0) == c_.N_p && weight.size(1) == c_.K_p);
    QLM_CHECK(weight.on_host());
    const Tensor host = weight.dtype() == c_.act_dtype ? weight.contiguous() : weight.to(c_.act_dtype);
    w_ = host.to_device(c_.device);
    cuda::LtGemmSpec spec;
    spec.a_type = spec.b_type = spec.d_type = cuda::data_type_of(c_.act_dtype);
    spec.compute = CUBLAS_COMPUTE_32F;
    spec.N = c_.N_p;
    spec.K = c_.K_p;
    spec.what = fmt::format("{} dense", dtype_name(c_.act_dtype));
    gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
  }

  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_cuda_linear_args("cuda_cublas_dense", x, y, bias, c_.K_p, c_.N_p, c_.act_dtype, c_.device);
    if (M == 0) return;
    QLM_CHECK(gemm_ != nullptr);
    const float* b = bias ? bias->data<float>() : nullptr;
    if (cuda::dense_gemv_wanted(M, c_.N_p)) {
      cuda::DenseGemvArgs g;
      g.x = x.raw_data();
      g.w = w_.raw_data();
      g.bias = b;
      g.y = y.raw_data();
      g.type = cuda_float_type(c_.act_dtype);
      g.M = M;
      g.K = c_.K_p;
      g.N = c_.N_p;
      QLM_CUDA_CHECK(cuda::launch_dense_gemv(g, cuda::context(c_.device.index).stream));
      return;
    }
    if (gemm_->run(w_.raw_data(), x.raw_data(), y.raw_data(), M, b, nullptr, nullptr) || !b) return;
    cuda::EpilogueArgs e;  // bias only, in place
    e.acc = y.raw_data();
    e.acc_type = cuda_float_type(c_.act_dtype);
    e.y = y.raw_data();
    e.y_type = e.acc_type;
    e.M = M;
    e.N = c_.N_p;
    e.bias = b;
    QLM_CUDA_CHECK(cuda::launch_epilogue(e, cuda::context(c_.device.index).stream));
  }

  size_t weight_bytes() const override { return w_.defined() ? w_.nbytes() : 0; }
  const Tensor* device_weight() const override { return w_.defined() ? &w_ : nullptr; }

 private:
  DenseLinearConfig c_;
  Tensor w_;  // [N_p, K_p] in the activation dtype, on the device
  std::unique_ptr<cuda::LtGemm> gemm_;
};

const DenseKernelRegistrar kRegister{{
    .name = "cuda_cublas_dense",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 10,
    .can_implement = dense_reason,
    .create = [](const DenseLinearConfig& c) -> std::unique_ptr<DenseLinearKernel> {
      return std::make_unique<DenseCublasKernel>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
