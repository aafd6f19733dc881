// `cpu_fast_dense`: dense F32/BF16/F16 weights repacked into column tiles (dense_layout.h), kept in
// their own type; f32 activations and accumulation; AVX-512 when present, else AVX2.
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/dense_linear.h"

namespace qlm {
namespace {

class DenseFastKernel final : public DenseLinearKernel {
 public:
  explicit DenseFastKernel(const CpuFastOps* ops) : ops_(ops) {}
  std::string name() const override { return "cpu_fast_dense"; }
  void prepare(const Tensor& weight) override { packed_ = pack_dense(weight); }
  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = packed_.K == 0 ? y.numel() / std::max<int64_t>(1, packed_.N)
                                     : check_linear_args("cpu_fast_dense", x, y, bias, packed_.K, packed_.N);
    ops_->dense(packed_, x.data<float>(), M, y.data<float>(), bias ? bias->data<float>() : nullptr, compute_pool());
  }
  size_t weight_bytes() const override { return packed_.weight_bytes(); }

 private:
  const CpuFastOps* ops_;
  PackedDense packed_;
};

const DenseKernelRegistrar kRegister{{
    .name = "cpu_fast_dense",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 10,
    .can_implement = [](const DenseLinearConfig& c) -> std::optional<std::string> {
      if (c.device.type != DeviceType::CPU) return "runs on CPU only";
      if (!cpu_features().avx2_fma)
        return fmt::format("this CPU lacks AVX2 + FMA + F16C (has: {})", cpu_features().describe());
      if (c.weight_dtype != DType::F32 && c.weight_dtype != DType::BF16 && c.weight_dtype != DType::F16)
        return fmt::format("weight dtype {} is not F32, BF16 or F16", dtype_name(c.weight_dtype));
      if (c.act_dtype != DType::F32 && c.act_dtype != DType::BF16 && c.act_dtype != DType::F16)
        return fmt::format("activation dtype {} is not F32, BF16 or F16", dtype_name(c.act_dtype));
      return std::nullopt;
    },
    .create = [](const DenseLinearConfig&) -> std::unique_ptr<DenseLinearKernel> {
      return std::make_unique<DenseFastKernel>(cpu_features().avx512 ? cpu_fast_avx512_ops() : cpu_fast_avx2_ops());
    },
}};

}  // namespace
}  // namespace qlm
