// The down projection forming the MLP's activation itself (MPLinearKernel::run_silu_mul, cuda_wna16_fast's stream
// kernel at one m-tile): the same bytes as the runtime's silu_and_mul kernel followed by run(), where it runs;
// declined, with nothing written, where it cannot. Needs a GPU; skips without one.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/device.h"
#include "kernels/cuda/wna16_fast_paths.h"
#include "kernels/mp_linear.h"
#include "runtime/ops/cuda/device_ops.h"
#include "tests/kernels/wna16_random.h"
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

using testing::Wna16Spec;

class CudaWna16SiluMul : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto devices = cuda_devices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    capability_ = devices[0].capability;
  }
  void TearDown() override {
    set_wna16_fast_path(Wna16FastPath::Auto);
    set_wna16_stream_max_stages(0);
    set_wna16_stream_producers(0);
  }

  std::unique_ptr<MPLinearKernel> prepared(const Wna16Spec& spec, DType act) const {
    auto kernel = MPKernelRegistry::instance()
                      .find("cuda_wna16_fast")
                      ->create(testing::wna16_config(spec, act, Device::cuda(0), capability_));
    kernel->prepare(testing::random_wna16(spec).weights);
    return kernel;
  }

  // Fresh gate | up rows [M, 2K] in `act` on the GPU, values in [-6, 6] (SiLU's bend and both tails).
  static Tensor gate_up_rows(int64_t M, int64_t K, DType act, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
    std::vector<float> v(static_cast<size_t>(M * 2 * K));
    for (float& f : v) f = dist(rng);
    return Tensor::from_vector(v, {M, 2 * K}).to(act).to_device(Device::cuda(0));
  }

  static std::vector<unsigned char> bytes(const Tensor& t) {
    const Tensor host = t.to_device(Device::cpu());
    const auto* p = reinterpret_cast<const unsigned char*>(host.raw_data());
    return {p, p + host.nbytes()};
  }

  // Runs M tokens of `spec` both ways; expects the fused form where `fused` (then the same bytes, every element
  // written), else a decline that left the poisoned output untouched.
  void check(const MPLinearKernel& kernel, const Wna16Spec& spec, DType act, int64_t M, bool fused) const {
    SCOPED_TRACE(fmt::format("{} act={} M={}", testing::wna16_spec_str(spec), dtype_name(act), M));
    const Tensor gu = gate_up_rows(M, spec.K, act, static_cast<uint32_t>(spec.seed * 100 + M));
    const std::vector<float> bias_values(static_cast<size_t>(spec.N), 0.25f);
    const Tensor bias = Tensor::from_vector(bias_values, {spec.N}).to_device(Device::cuda(0));
    const Tensor* b = M % 2 ? &bias : nullptr;  // a bias on odd M
    Tensor want = testing::nan_poisoned(M, spec.N, act, Device::cuda(0));
    kernel.run(ops::cu::silu_and_mul(gu), want, b);
    Tensor got = testing::nan_poisoned(M, spec.N, act, Device::cuda(0));
    const std::vector<unsigned char> poison = bytes(got);
    ASSERT_EQ(kernel.run_silu_mul(gu, got, b), fused);
    EXPECT_EQ(bytes(got), fused ? bytes(want) : poison);
  }

  int capability_ = 0;
};

// Layers on the stream kernel (forced: the rule gives 8-bit weights the GEMV kernel) at one m-tile (1-8 tokens): g128
// (one scale group per stage), g32 with zero points, odd groups (g160), 8-bit with zero points, channelwise; K from one
// stage to many, N not a multiple of 256; bf16 and f16; every producer-warp count and the shallowest ring (a producer
// forming several stages' x in turn).
TEST_F(CudaWna16SiluMul, SameBytesAsTheSeparateActivation) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  set_wna16_fast_path(Wna16FastPath::Stream);
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 4096, .N = 600, .group_size = 128, .seed = 1},
      {.bits = 4, .K = 2048, .N = 333, .group_size = 32, .zero_points = true, .seed = 2},
      {.bits = 4, .K = 1440, .N = 264, .group_size = 160, .seed = 3},
      {.bits = 8, .K = 1152, .N = 200, .group_size = 64, .zero_points = true, .seed = 4},
      {.bits = 4, .K = 128, .N = 4000, .group_size = -1, .seed = 5},
      {.bits = 4, .K = 14336, .N = 520, .group_size = 128, .seed = 6},
  };
  for (const auto& s : specs)
    for (DType act : {DType::BF16, DType::F16}) {
      const auto kernel = prepared(s, act);
      for (int64_t M : {1, 2, 3, 5, 8}) check(*kernel, s, act, M, true);
    }
  const auto kernel = prepared(specs[0], DType::BF16);
  for (int producers : {1, 2, 3})
    for (int cap : {0, 3}) {
      SCOPED_TRACE(fmt::format("producers {}, ring cap {}", producers, cap));
      set_wna16_stream_producers(producers);
      set_wna16_stream_max_stages(cap);
      for (int64_t M : {1, 4, 7}) check(*kernel, specs[0], DType::BF16, M, true);
    }
}

// The rule's own choice on a Llama-3-8B-shaped down projection (4-bit g128): fused at 1-8 tokens.
TEST_F(CudaWna16SiluMul, TheRuleFusesDecodeSteps) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  const Wna16Spec down{.bits = 4, .K = 14336, .N = 4096, .group_size = 128, .seed = 21};
  const auto kernel = prepared(down, DType::BF16);
  for (int64_t M : {1, 8}) check(*kernel, down, DType::BF16, M, true);
}

// Declined, nothing written: two m-tiles (9-16 tokens) and beyond, act-order (x would need its gather), K not a
// multiple of 8 (rows not in 16-byte pieces), a gate | up view that is not 16-byte aligned, the wrong width.
TEST_F(CudaWna16SiluMul, DeclinedWhereTheKernelCannot) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  const Wna16Spec plain{.bits = 4, .K = 2048, .N = 300, .group_size = 128, .seed = 11};
  const auto kernel = prepared(plain, DType::BF16);
  for (int64_t M : {9, 16, 17, 64}) check(*kernel, plain, DType::BF16, M, false);

  const Wna16Spec act_order{.bits = 4, .K = 2048, .N = 300, .group_size = 128, .act_order = true, .seed = 12};
  check(*prepared(act_order, DType::BF16), act_order, DType::BF16, 1, false);
  const Wna16Spec odd_k{.bits = 4, .K = 100, .N = 64, .group_size = 20, .seed = 13};
  check(*prepared(odd_k, DType::BF16), odd_k, DType::BF16, 1, false);

  // One row at an 8-byte offset: contiguous, but not in 16-byte pieces.
  const Tensor wide = gate_up_rows(1, plain.K + 4, DType::BF16, 14);
  const Tensor shifted = wide.view({2 * plain.K + 8}).narrow(0, 4, 2 * plain.K).view({1, 2 * plain.K});
  Tensor y = testing::nan_poisoned(1, plain.N, DType::BF16, Device::cuda(0));
  EXPECT_FALSE(kernel->run_silu_mul(shifted, y, nullptr));
  EXPECT_FALSE(kernel->run_silu_mul(gate_up_rows(1, plain.K / 2, DType::BF16, 15), y, nullptr));
}

}  // namespace
}  // namespace qlm
