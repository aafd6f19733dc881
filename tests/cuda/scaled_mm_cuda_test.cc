// CUDA scaled-mm kernels (cuda_scaled_mm_fp8_lt, cuda_scaled_mm_int8_lt, cuda_scaled_mm_simple)
// and the GPU activation quantizer against the CPU oracle (cpu_ref and the shared quantizers) on
// the same weights and the same activations (rounded to the activation dtype first). Suites named
// Cuda* need a GPU and skip without one; ScaledMMCudaRegistry checks the registration anywhere the
// backend is built.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/float_convert.h"
#include "cuda/device.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"
#include "support/scaled_mm_test_data.h"
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

struct Variant {
  W8Type type;
  WeightScaleKind ws;
  ActScheme act;
  bool sym = true;
  int64_t block = 128;
  int64_t phase = 0;
};

std::string variant_str(const ScaledMMConfig& c, int64_t M) {
  return fmt::format("{} M={}", c.describe(), M);
}

ScaledMMConfig make_config(const Variant& v, int64_t N, int64_t K, DType act, Device device, int capability) {
  ScaledMMConfig c;
  c.K_p = K;
  c.N_p = N;
  c.weight_type = v.type;
  c.weight_scale = v.ws;
  c.block_n = c.block_k = v.ws == WeightScaleKind::Block ? v.block : 0;
  c.act = v.act;
  c.act_group = v.act == ActScheme::DynamicTokenGroup ? v.block : 0;
  c.act_symmetric = v.sym;
  c.act_dtype = act;
  c.device = device;
  c.capability = capability;
  return c;
}

ScaledMMWeights make_weights(const Variant& v, int64_t N, int64_t K, uint64_t seed) {
  return testing::random_scaled_mm_weights({v.type, v.ws, v.sym, v.block, v.phase}, N, K, seed);
}

Tensor device_acts(const std::vector<float>& x, int64_t M, int64_t K, DType act) {
  return Tensor::from_vector(x, {M, K}).to(act).to_device(Device::cuda(0));
}

// The reference rounded to the output dtype: the closest any kernel writing `act` can get, so the
// tolerances below bound the kernel's own error rather than the unavoidable output rounding.
std::vector<float> rounded_to(DType act, std::vector<float> v) {
  for (float& x : v) {
    if (act == DType::BF16) x = bf16_to_f32(f32_to_bf16(x));
    if (act == DType::F16) x = f16_to_f32(f32_to_f16(x));
  }
  return v;
}

std::vector<float> run_gpu(const ScaledMMKernelRegistry::Entry& e, const ScaledMMConfig& c, const ScaledMMWeights& w,
                           const std::vector<float>& x, int64_t M, const std::vector<float>* bias) {
  auto k = e.create(c);
  k->prepare(testing::clone_weights(w));
  Tensor xt = device_acts(x, M, c.K_p, c.act_dtype);
  Tensor y = testing::nan_poisoned(M, c.N_p, c.act_dtype, Device::cuda(0));
  Tensor b = bias ? Tensor::from_vector(*bias, {c.N_p}).to_device(c.device) : Tensor();
  k->run(xt, y, bias ? &b : nullptr);
  return y.to_device(Device::cpu()).to_float_vector();
}

// Tolerances (mean relative error vs cpu_ref): INT8 with F32 output is cpu_ref's arithmetic
// (exact integer sums, the same double epilogue); FP8 sums the same codes in another order;
// 16-bit outputs add one rounding of the result.
double tolerance(const ScaledMMConfig& c) {
  if (c.act_dtype == DType::BF16) return 2e-3;
  if (c.act_dtype == DType::F16) return 1e-3;
  if (c.weight_type == W8Type::Int8 && c.act != ActScheme::None) return 1e-7;
  if (c.act == ActScheme::None) return 1e-5;
  return 1e-3;
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> v = {
      {W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, true},
      {W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, false},
      {W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicTensor, true},
      {W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, true},
      {W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, false},
      {W8Type::Int8, WeightScaleKind::Channel, ActScheme::None, true},
      {W8Type::Fp8E4M3, WeightScaleKind::Tensor, ActScheme::StaticTensor},
      {W8Type::Fp8E4M3, WeightScaleKind::Tensor, ActScheme::DynamicTensor},
      {W8Type::Fp8E4M3, WeightScaleKind::Tensor, ActScheme::DynamicToken},
      {W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::StaticTensor},
      {W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken},
      {W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup, true, 128, 0},
      {W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup, true, 32, 20},
      {W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicToken, true, 128, 0},
      {W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::None},
      {W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::None, true, 128, 0},
  };
  return v;
}

// ---- activation quantizer: bit-identical to the CPU quantizers ----

#ifdef QLM_WITH_CUDA
TEST(CudaActQuant, CodesAndScalesMatchCpuQuantizersBitExactly) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  for (const Variant& v : all_variants()) {
    if (v.act == ActScheme::None) continue;
    for (DType act : {DType::F32, DType::BF16, DType::F16})
      for (int64_t M : {1, 5, 33, 130})
        for (int64_t K : {100, 272, 1000}) {
          const ScaledMMConfig c = make_config(v, 16, K, act, Device::cuda(0), cuda_capability(0));
          const std::string what = variant_str(c, M);
          ScaledMMWeights w;
          w.K = K;
          w.input_scale = v.type == W8Type::Int8 ? 0.015f : 0.004f;  // some codes saturate
          w.input_zero_point = v.sym ? 0 : -5;
          w.k_phase = v.phase;
          const std::vector<float> x = testing::scaled_mm_test_acts(M, K, act, 77 + M + K);
          const CudaActCodes q =
              quantize_acts_cuda(c, w.input_scale, w.input_zero_point, w.k_phase, device_acts(x, M, K, act));
          const Tensor codes = q.codes.to_device(Device::cpu());
          const std::vector<float> scales = q.scales.to_device(Device::cpu()).to_float_vector();
          ScaledMMConfig cc = c;
          cc.device = Device::cpu();
          if (v.type == W8Type::Int8) {
            std::vector<int8_t> want(static_cast<size_t>(M * K));
            const ActScales s = quantize_acts_int8(cc, w, x.data(), M, want.data(), K, nullptr);
            const Tensor zeros = q.zeros.to_device(Device::cpu());
            ASSERT_EQ(std::memcmp(codes.data<int8_t>(), want.data(), want.size()), 0) << what;
            ASSERT_EQ(scales, s.scale) << what;
            ASSERT_EQ(std::vector<int32_t>(zeros.data<int32_t>(), zeros.data<int32_t>() + M), s.zero) << what;
          } else {
            std::vector<float> want(static_cast<size_t>(M * K));
            const ActScales s = quantize_acts_fp8(cc, w, x.data(), M, want.data(), K, nullptr);
            ASSERT_EQ(q.groups, s.groups) << what;
            for (int64_t i = 0; i < M * K; ++i) {
              const float got = e4m3_to_f32(codes.data<uint8_t>()[i]);
              ASSERT_EQ(f32_bits(got), f32_bits(want[static_cast<size_t>(i)])) << what << " element " << i;
            }
            ASSERT_EQ(scales, s.scale) << what;
          }
        }
  }
}
#endif

// ---- kernels vs cpu_ref ----

// Runs every CUDA kernel that can implement the variant; cuda_scaled_mm_fp8_lt also with its
// outer-vector scale mode off (the F32 GEMM + epilogue path).
void check_variant(const Variant& v, int64_t N, int64_t K, std::set<std::string>& ran,
                   const std::vector<int64_t>& Ms = {1, 5, 33, 130, 300}) {
  for (DType act : {DType::F32, DType::BF16, DType::F16}) {
    const ScaledMMConfig c = make_config(v, N, K, act, Device::cuda(0), cuda_capability(0));
    const ScaledMMWeights w = make_weights(v, N, K, 11 + N + K);
    std::vector<float> bias(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) bias[static_cast<size_t>(n)] = 0.05f * static_cast<float>(n % 7) - 0.1f;
    for (int64_t M : Ms) {
      const std::vector<float> x = testing::scaled_mm_test_acts(M, K, act, 5 * M + K);
      const bool with_bias = M % 2 == 1;
      const std::vector<float> want = testing::scaled_mm_cpu_ref(c, w, x, M, with_bias ? &bias : nullptr);
      for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
        if (e.device != DeviceType::CUDA || e.can_implement(c)) continue;
        ran.insert(e.name);
        for (bool outer_vec : {true, false}) {
          if (!outer_vec && e.name != "cuda_scaled_mm_fp8_lt") continue;
          if (!outer_vec) setenv("QLM_CUDA_FP8_OUTER_VEC", "0", 1);
          const std::vector<float> got = run_gpu(e, c, w, x, M, with_bias ? &bias : nullptr);
          unsetenv("QLM_CUDA_FP8_OUTER_VEC");
          const std::string what =
              fmt::format("{}{}: {} bias={}", e.name, outer_vec ? "" : " (outer-vec off)", variant_str(c, M), with_bias);
          ASSERT_EQ(testing::first_non_finite(got.data(), static_cast<int64_t>(got.size())), -1) << what;
          EXPECT_LE(testing::mean_relative_error(got, rounded_to(act, want)), tolerance(c)) << what;
        }
      }
    }
  }
}

class CudaScaledMMTest : public ::testing::TestWithParam<Variant> {};

TEST_P(CudaScaledMMTest, MatchesCpuRef) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  const Variant& v = GetParam();
  std::set<std::string> ran;
  check_variant(v, 144, 272, ran);  // multiples of 16 (the cuBLASLt kernels run), not of 256
  check_variant(v, 70, 100, ran);   // odd: cuda_scaled_mm_simple only
  EXPECT_TRUE(ran.count("cuda_scaled_mm_simple")) << "simple kernel did not run";
  const bool lt_format = v.ws != WeightScaleKind::Block && v.act != ActScheme::None && v.act != ActScheme::DynamicTokenGroup;
  if (lt_format && v.type == W8Type::Int8) {
    EXPECT_TRUE(ran.count("cuda_scaled_mm_int8_lt"));
  }
  if (lt_format && v.type == W8Type::Fp8E4M3 && cuda_capability(0) >= 89) {
    EXPECT_TRUE(ran.count("cuda_scaled_mm_fp8_lt"));
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaScaledMMTest, ::testing::ValuesIn(all_variants()), [](const auto& info) {
  const Variant& v = info.param;
  return fmt::format("{}_{}_{}{}_b{}_p{}", w8_type_name(v.type), weight_scale_kind_name(v.ws), act_scheme_name(v.act),
                     v.sym ? "" : "_asym", v.block, v.phase);
});

// Llama-sized K with the cuBLASLt kernels: long int32 / FP8 accumulations.
TEST(CudaScaledMMLarge, LongReductions) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  std::set<std::string> ran;
  check_variant({W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, false}, 256, 4096, ran, {1, 33, 130});
  check_variant({W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken}, 256, 4096, ran, {1, 33, 130});
  check_variant({W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup}, 256, 4096, ran, {1, 33, 130});
}

// ---- registration (any machine with the backend built) ----

TEST(ScaledMMCudaRegistry, KernelsAreListedForCuda) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  for (const char* name : {"cuda_scaled_mm_fp8_lt", "cuda_scaled_mm_int8_lt", "cuda_scaled_mm_simple"}) {
    const auto* e = ScaledMMKernelRegistry::instance().find(name);
    ASSERT_TRUE(e != nullptr) << name;
    EXPECT_EQ(e->device, DeviceType::CUDA) << name;
    EXPECT_EQ(e->backend, "cuda") << name;
  }
}

TEST(ScaledMMCudaRegistry, CanImplementGivesReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  auto& reg = ScaledMMKernelRegistry::instance();
  const Variant fp8{W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken};
  ScaledMMConfig c = make_config(fp8, 4096, 4096, DType::BF16, Device::cuda(0), 80);
  auto r = reg.find("cuda_scaled_mm_fp8_lt")->can_implement(c);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("capability"), std::string::npos) << *r;
  EXPECT_NE(r->find("89"), std::string::npos) << *r;
  EXPECT_FALSE(reg.find("cuda_scaled_mm_simple")->can_implement(c).has_value());
  c.capability = 90;
  EXPECT_FALSE(reg.find("cuda_scaled_mm_fp8_lt")->can_implement(c).has_value());
  c.K_p = 100;
  r = reg.find("cuda_scaled_mm_fp8_lt")->can_implement(c);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("16"), std::string::npos) << *r;
  c.device = Device::cpu();
  for (const char* name : {"cuda_scaled_mm_fp8_lt", "cuda_scaled_mm_int8_lt", "cuda_scaled_mm_simple"})
    EXPECT_TRUE(reg.find(name)->can_implement(c).has_value()) << name;

  const Variant int8{W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, false};
  c = make_config(int8, 70, 100, DType::F16, Device::cuda(0), 90);
  r = reg.find("cuda_scaled_mm_int8_lt")->can_implement(c);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("multiples of 4"), std::string::npos) << *r;
  EXPECT_TRUE(reg.find("cuda_scaled_mm_fp8_lt")->can_implement(c).has_value());
  EXPECT_FALSE(reg.find("cuda_scaled_mm_simple")->can_implement(c).has_value());
}

TEST(ScaledMMCudaRegistry, SelectionPrefersCublasLt) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  auto& reg = ScaledMMKernelRegistry::instance();
  auto chosen = [&](const Variant& v, int64_t N, int64_t K) {
    return reg.select(make_config(v, N, K, DType::BF16, Device::cuda(0), 90), DeviceType::CUDA, "auto", "scaled-mm",
                      "L").second.chosen;
  };
  // cuda_scaled_mm_fp8_fast (priority 5) goes first where it can; K not a multiple of 256: cuBLASLt.
  EXPECT_EQ(chosen({W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken}, 4096, 4096),
            "cuda_scaled_mm_fp8_fast");
  EXPECT_EQ(chosen({W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken}, 4096, 4112),
            "cuda_scaled_mm_fp8_lt");
  // cuda_scaled_mm_int8_fast (priority 5) for symmetric INT8 activations; zero points or K not a multiple of 256:
  // cuBLASLt.
  EXPECT_EQ(chosen({W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken}, 4096, 4096),
            "cuda_scaled_mm_int8_fast");
  EXPECT_EQ(chosen({W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, /*sym=*/false}, 4096, 4096),
            "cuda_scaled_mm_int8_lt");
  EXPECT_EQ(chosen({W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor}, 4096, 4112),
            "cuda_scaled_mm_int8_lt");
  EXPECT_EQ(chosen({W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup}, 4096, 4096),
            "cuda_scaled_mm_simple");
  EXPECT_EQ(chosen({W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::None}, 4096, 4096), "cuda_scaled_mm_simple");
}

}  // namespace
}  // namespace qlm
