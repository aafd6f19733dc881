// `cpu_fast_avx512_vnni`, `cpu_fast_avx512` and `cpu_fast_avx2` mixed-precision kernels: weights
// repacked once into the cpu_fast layout (wna16_layout.h), f32 activations, f32 accumulation, weights
// dequantized on the fly; the VNNI kernel multiplies the integer codes by activations split exactly
// into 8-bit limbs (wna16_vnni.h), falling back to cpu_fast_avx512's float code for activations it
// declines. Every bit width (2/3/4/8), group size, zero points and act-order are supported.
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_args.h"
#include "kernels/cpu/wna16_standard.h"
#include "kernels/cpu/wna16_vnni.h"
#include "kernels/mp_linear.h"

namespace qlm {
namespace {

class Wna16FastKernel final : public MPLinearKernel {
 public:
  // vnni: run the integer kernel of wna16_vnni.h (only where the CPU has AVX-512 VNNI).
  Wna16FastKernel(std::string name, const CpuFastOps* ops, bool vnni = false)
      : name_(std::move(name)), ops_(ops), vnni_(vnni) {}
  std::string name() const override { return name_; }
  void prepare(WNA16Weights weights) override {
    packed_ = pack_wna16(weights);
    vnni_fits_ = vnni_ && wna16_vnni_sums_fit(packed_);
  }
  void run(const Tensor& x, Tensor& y, const Tensor* bias) const override {
    const int64_t M = check_linear_args(name_.c_str(), x, y, bias, packed_.K, packed_.N);
    const float* b = bias ? bias->data<float>() : nullptr;
    // The integer kernel declines non-finite or subnormal-scaled activations; the float kernel runs them.
    if (vnni_fits_ && wna16_vnni_gemv(packed_, x.data<float>(), M, y.data<float>(), b, compute_pool())) return;
    ops_->wna16(packed_, x.data<float>(), M, y.data<float>(), b, compute_pool());
  }
  size_t weight_bytes() const override { return packed_.weight_bytes(); }

 private:
  std::string name_;
  const CpuFastOps* ops_;
  bool vnni_ = false;
  bool vnni_fits_ = false;  // vnni_ and every group's int32 sums fit (wna16_vnni_sums_fit)
  PackedWna16 packed_;
};

std::optional<std::string> fast_can_implement(const MPLinearLayerConfig& c, bool isa_present, const char* isa) {
  if (c.device.type != DeviceType::CPU) return "runs on CPU only";
  if (!isa_present) return fmt::format("this CPU lacks {} (has: {})", isa, cpu_features().describe());
  return cpu_wna16_can_implement(c);  // beyond the ISA, the fast kernels take what cpu_ref takes
}

const MPKernelRegistrar kRegisterAvx512Vnni{{
    .name = "cpu_fast_avx512_vnni",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 5,
    .can_implement =
        [](const MPLinearLayerConfig& c) {
          return fast_can_implement(c, cpu_features().avx512_vnni, "AVX-512 VNNI (with F, BW, DQ, VL)");
        },
    .create = [](const MPLinearLayerConfig&) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<Wna16FastKernel>("cpu_fast_avx512_vnni", cpu_fast_avx512_ops(), true);
    },
}};

const MPKernelRegistrar kRegisterAvx512{{
    .name = "cpu_fast_avx512",
    .backend = "cpu_fast",
    .device = DeviceType::CPU,
    .priority = 10,
    .can_implement =
        [](const MPLinearLayerConfig& c) {
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
    .can_implement =
        [](const MPLinearLayerConfig& c) {
          return fast_can_implement(c, cpu_features().avx2_fma, "AVX2 + FMA + F16C");
        },
    .create = [](const MPLinearLayerConfig&) -> std::unique_ptr<MPLinearKernel> {
      return std::make_unique<Wna16FastKernel>("cpu_fast_avx2", cpu_fast_avx2_ops());
    },
}};

}  // namespace
}  // namespace qlm
