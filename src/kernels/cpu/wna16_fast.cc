// `cpu_fast_avx512` and `cpu_fast_avx2` mixed-precision kernels: weights repacked once into the
// cpu_fast layout (wna16_layout.h), f32 activations, f32 accumulation, weights dequantized on the
// fly. Every bit width (2/3/4/8), group size, zero points and act-order are supported.
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/wna16_standard.h"
#include "kernels/mp_linear.h"

namespace qlm {
namespace {

class Wna16FastKernel final : public MPLinearKernel {
 public:
  Wna16FastKernel(std::string name, const CpuFastOps* ops) : name_(std::move(name)), ops_(ops) {}
  std::string name() const override { return name_; }
  void prepare(WNA16Weights weights) override { packed_ = pack_wna16(weights); }
  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_linear_args(name_.c_str(), x, y, bias, packed_.K, packed_.N);
    ops_->wna16(packed_, x.data<float>(), M, y.data<float>(), bias ? bias->data<float>() : nullptr,
                compute_pool());
  }
  size_t weight_bytes() const override { return packed_.weight_bytes(); }

 private:
  std::string name_;
  const CpuFastOps* ops_;
  PackedWna16 packed_;
};

std::optional<std::string> fast_can_implement(const MPLinearLayerConfig& c, bool isa_present, const char* isa) {
  if (c.device.type != DeviceType::CPU) return "runs on CPU only";
  if (!isa_present) return fmt::format("this CPU lacks {} (has: {})", isa, cpu_features().describe());
  return cpu_wna16_can_implement(c);  // beyond the ISA, the fast kernels take what cpu_ref takes
}

const MPKernelRegistrar kRegisterAvx512{{
    .name = "cpu_fast_avx512",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 10,
    .can_implement = [](const MPLinearLayerConfig& c) {
      return fast_can_implement(c, cpu_features().avx512, "AVX-512 (F, BW, DQ, VL)");
    },
    .create = [](const MPLinearLayerConfig&) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<Wna16FastKernel>("cpu_fast_avx512", cpu_fast_avx512_ops());
    },
}};

const MPKernelRegistrar kRegisterAvx2{{
    .name = "cpu_fast_avx2",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 20,
    .can_implement = [](const MPLinearLayerConfig& c) {
      return fast_can_implement(c, cpu_features().avx2_fma, "AVX2 + FMA + F16C");
    },
    .create = [](const MPLinearLayerConfig&) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<Wna16FastKernel>("cpu_fast_avx2", cpu_fast_avx2_ops());
    },
}};

}  // namespace
}  // namespace qlm
