// cuda_scaled_mm_fp8_fast against the CPU oracle (cpu_ref) on the same weights and activations
// (rounded to the activation dtype first): tensor / channel weight scales x dynamic per-token /
// static / dynamic per-tensor activations x BF16 / F16 / F32, all of its paths (the weight-
// streaming kernel, forced for every M through QLM_FP8_FAST_MAX_M; the default M rule, which hands
// M > 16 to the CUTLASS sm_90a GEMM on sm_90 or else to cuBLASLt; every CUTLASS tile configuration
// and the cuBLASLt path, forced through QLM_FP8_CUTLASS_CONFIG; the GEMM quantizing its own activations up to 4
// tokens, bit for bit against the quantizer + GEMM pair), poisoned outputs; its vectorised per-token quantizer
// bit-exactly against the CPU quantizer; its can_implement reasons and its place in kernel selection. Suites named
// Cuda* need a GPU for the numeric tests and skip without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/float_convert.h"
#include "cuda/device.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/scaled_mm.h"
#include "support/scaled_mm_test_data.h"
#include "tests/support/cuda_test_util.h"
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/fp8_cutlass_gemm.h"
#endif

namespace qlm {
namespace {

constexpr const char* kName = "cuda_scaled_mm_fp8_fast";

using Fp8Variant = testing::W8A8Variant;

ScaledMMConfig fp8_config(const Fp8Variant& v, int64_t N, int64_t K, DType act, Device device, int capability) {
  return testing::w8a8_variant_config(W8Type::Fp8E4M3, v, N, K, act, device, capability);
}

// ---- helpers and tests that run kernels (a CUDA build) ----
#ifdef QLM_WITH_CUDA

ScaledMMWeights fp8_weights(const Fp8Variant& v, int64_t N, int64_t K, uint64_t seed) {
  return testing::random_scaled_mm_weights({.type = W8Type::Fp8E4M3, .ws = v.ws}, N, K, seed);
}

// The kernel prepared with QLM_FP8_FAST_MAX_M = max_m and QLM_FP8_CUTLASS_CONFIG = config (empty:
// unset, the default rule).
std::unique_ptr<ScaledMMKernel> make_kernel(const ScaledMMConfig& c, const ScaledMMWeights& w, const std::string& max_m,
                                            const std::string& config = "") {
  std::vector<std::pair<std::string, std::string>> env;
  if (!max_m.empty()) env.emplace_back("QLM_FP8_FAST_MAX_M", max_m);
  if (!config.empty()) env.emplace_back("QLM_FP8_CUTLASS_CONFIG", config);
  return testing::make_scaled_mm_kernel(kName, c, w, env);
}

void check_shape(const Fp8Variant& v, int64_t N, int64_t K, const std::vector<DType>& dtypes,
                 const std::vector<int64_t>& Ms) {
  testing::check_w8a8_streaming_kernel(kName, "QLM_FP8", W8Type::Fp8E4M3, v, N, K, dtypes, Ms, /*weight_seed=*/3,
                                       /*act_seed_mul=*/7);
}

class CudaScaledMMFp8FastTest : public ::testing::TestWithParam<Fp8Variant> {};

TEST_P(CudaScaledMMFp8FastTest, MatchesCpuRef) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 89) GTEST_SKIP() << "FP8 mma needs capability >= 89";
  const std::vector<int64_t> Ms = {1, 3, 16, 17, 32, 64, 129, 300};
  // N not a multiple of the 128-row block (idle warps); K of 2 and 5 steps (odd K splits).
  check_shape(GetParam(), 144, 512, {DType::BF16, DType::F16, DType::F32}, Ms);
  check_shape(GetParam(), 272, 1280, {DType::BF16, DType::F16}, Ms);
}

INSTANTIATE_TEST_SUITE_P(All, CudaScaledMMFp8FastTest, ::testing::ValuesIn(testing::w8a8_variants()),
                         [](const auto& info) { return testing::w8a8_variant_name(info.param); });

// Llama-sized K: long FP8 accumulations, K split across many blocks.
TEST(CudaScaledMMFp8FastLarge, LongReductions) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 89) GTEST_SKIP() << "FP8 mma needs capability >= 89";
  check_shape({WeightScaleKind::Channel, ActScheme::DynamicToken}, 256, 4096, {DType::BF16}, {1, 16, 64});
  check_shape({WeightScaleKind::Tensor, ActScheme::DynamicToken}, 128, 14336, {DType::BF16}, {1, 17});
}

// Longer FP32 promotion intervals (QLM_FP8_PROMOTION: fewer wgmma pipeline drains, more of each
// sum in the tensor core's FP8 accumulator) stay within the W8A8 tolerance at K = 14336 on every
// CUTLASS configuration; the errors are printed for the notes.
TEST(CudaScaledMMFp8FastLarge, PromotionIntervals) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) != 90 || !cuda::fp8_cutlass_available())
    GTEST_SKIP() << "CUTLASS sm_90a kernels not available";
  const ScaledMMConfig c =
      fp8_config({WeightScaleKind::Tensor, ActScheme::DynamicToken}, 256, 14336, DType::BF16, Device::cuda(0), 90);
  const ScaledMMWeights w = fp8_weights({WeightScaleKind::Tensor, ActScheme::DynamicToken}, 256, 14336, 99);
  // The float64 references (a second each at M = 200) computed once, not per interval and configuration.
  const std::vector<int64_t> Ms = {17, 200};
  std::vector<std::vector<float>> xs, wants;
  for (int64_t M : Ms) {
    xs.push_back(testing::scaled_mm_test_acts(M, 14336, DType::BF16, 5 * M));
    wants.push_back(testing::scaled_mm_cpu_ref(c, w, xs.back(), M, nullptr));
  }
  for (const char* interval : {"4", "8", "16", "32"}) {
    setenv("QLM_FP8_PROMOTION", interval, 1);
    for (int i = 0; i < static_cast<int>(cuda::Fp8CutlassConfig::kCount); ++i) {
      const std::string config = cuda::fp8_cutlass_config_name(static_cast<cuda::Fp8CutlassConfig>(i));
      const auto k = make_kernel(c, w, "", config);
      for (size_t mi = 0; mi < Ms.size(); ++mi) {
        const int64_t M = Ms[mi];
        testing::trace_test_run(fmt::format("promotion {} {} M={}", interval, config, M));
        const std::vector<float> got = testing::run_scaled_mm_kernel(*k, c, xs[mi], M, nullptr);
        const double err = testing::mean_relative_error(got, wants[mi]);
        std::printf("fp8 promotion %s %s M=%lld rel_mean_error %.3e\n", interval, config.c_str(),
                    static_cast<long long>(M), err);
        EXPECT_LE(err, testing::w8a8_tolerance(DType::BF16)) << config << " promotion " << interval << " M=" << M;
      }
    }
  }
  unsetenv("QLM_FP8_PROMOTION");
}

// The GEMM quantizing its own activations: bit for bit the output of
// its quantizer, GEMM and reduction kernels (testing::check_quantizing_in_the_gemm).
TEST(CudaScaledMMFp8FastFused, QuantizingInTheGemmIsBitIdentical) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 89) GTEST_SKIP() << "FP8 mma needs capability >= 89";
  testing::check_quantizing_in_the_gemm(W8Type::Fp8E4M3, kName, "QLM_FP8");
  // Static and per-tensor dynamic scales always take the quantizer.
  const Fp8Variant st{WeightScaleKind::Tensor, ActScheme::StaticTensor};
  EXPECT_EQ(make_kernel(fp8_config(st, 144, 512, DType::BF16, Device::cuda(0), 90), fp8_weights(st, 144, 512, 5), "")
                ->path(1),
            "streaming");
}

// The vectorised per-token quantizer: codes and scales bit-identical to the CPU quantizer, for rows
// held in registers (1, 2, 4, 8 and 16 vectors of 8 per thread) and rows read twice (K = 40000, and
// F32 from K = 16392).
TEST(CudaScaledMMFp8FastQuant, PerTokenCodesMatchCpuBitExactly) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  for (DType act : {DType::F32, DType::BF16, DType::F16})
    for (int64_t M : {1, 5, 130})
      for (int64_t K : {8, 264, 2056, 4096, 14336, 16392, 28672, 40000}) {
        ScaledMMConfig c = fp8_config({WeightScaleKind::Tensor, ActScheme::DynamicToken}, 16, K, act, Device::cpu(), 0);
        const std::vector<float> x = testing::scaled_mm_test_acts(M, K, act, 13 + M + K);
        // Every other case launched for programmatic dependent launch (behind the upload: same result).
        const bool pdl = (M + K / 8) % 2 == 0;
        const testing::TokenCodes got = testing::gpu_token_codes(x, M, K, act, /*int8=*/false, pdl);
        ScaledMMWeights w;
        w.K = K;
        std::vector<float> want(static_cast<size_t>(M * K));
        const ActScales s = quantize_acts_fp8(c, w, x.data(), M, want.data(), K, nullptr);
        const std::string what = fmt::format("{} M={} K={}", dtype_name(act), M, K);
        ASSERT_EQ(got.scales, s.scale) << what;
        for (int64_t i = 0; i < M * K; ++i)
          ASSERT_EQ(f32_bits(e4m3_to_f32(got.codes[static_cast<size_t>(i)])), f32_bits(want[static_cast<size_t>(i)]))
              << what << " element " << i;
      }
}

// The quantizer's e4m3 conversion on every rounding case: a row whose absmax is 448 has scale 1,
// so its values are converted as they are: every e4m3 value, every midpoint between neighbours
// (ties to even), one float either side of each midpoint, values around half the smallest
// subnormal, signed zeros, both signs: codes identical to the CPU's f32_to_e4m3. NaN stays NaN (its
// sign is not kept: the GPU's scaling product returns the canonical NaN).
TEST(CudaScaledMMFp8FastQuant, EveryRoundingCaseMatchesCpuConversion) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> row = {448.0f};
  std::vector<float> magnitudes;
  for (int code = 0; code <= 0x7e; ++code) magnitudes.push_back(e4m3_to_f32(static_cast<uint8_t>(code)));
  for (int code = 0; code < 0x7e; ++code) {
    const float mid = 0.5f * (magnitudes[static_cast<size_t>(code)] + magnitudes[static_cast<size_t>(code) + 1]);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) magnitudes.push_back(v);
  }
  for (float v : {std::ldexp(1.0f, -10), std::nextafter(std::ldexp(1.0f, -10), 1.0f), std::ldexp(1.0f, -11),
                  std::ldexp(1.0f, -30), std::numeric_limits<float>::denorm_min()})
    magnitudes.push_back(v);
  for (float v : magnitudes) {
    row.push_back(v);
    row.push_back(-v);
  }
  row.push_back(std::numeric_limits<float>::quiet_NaN());
  row.push_back(-std::numeric_limits<float>::quiet_NaN());
  while (row.size() % 8 != 0) row.push_back(0.0f);
  const int64_t K = static_cast<int64_t>(row.size());
  const testing::TokenCodes got = testing::gpu_token_codes(row, 1, K, DType::F32, /*int8=*/false, /*pdl=*/false);
  ASSERT_EQ(got.scales, std::vector<float>{1.0f});
  for (int64_t i = 0; i < K; ++i) {
    const float v = row[static_cast<size_t>(i)];
    const uint8_t code = got.codes[static_cast<size_t>(i)];
    if (std::isnan(v)) {
      EXPECT_TRUE(e4m3_is_nan(code)) << "NaN at " << i;
      continue;
    }
    ASSERT_EQ(code, f32_to_e4m3(v)) << "value " << v << " (bits " << std::hex << f32_bits(v) << ")";
  }
}

#endif

// ---- registration (any machine with the backend built) ----

TEST(CudaScaledMMFp8FastRegistry, CanImplementGivesReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  const auto* e = ScaledMMKernelRegistry::instance().find(kName);
  ASSERT_TRUE(e != nullptr);
  EXPECT_EQ(e->device, DeviceType::CUDA);
  EXPECT_EQ(e->backend, "cuda");
  for (const Fp8Variant& v : testing::w8a8_variants())
    for (DType act : {DType::BF16, DType::F16, DType::F32})
      EXPECT_FALSE(e->can_implement(fp8_config(v, 4096, 14336, act, Device::cuda(0), 90)).has_value());
  const Fp8Variant tok{WeightScaleKind::Channel, ActScheme::DynamicToken};
  auto reason = [&](const ScaledMMConfig& c) {
    const auto r = e->can_implement(c);
    return r ? *r : std::string();
  };
  EXPECT_NE(reason(fp8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 80)).find("89"), std::string::npos);
  EXPECT_NE(reason(fp8_config(tok, 4096, 4096 + 16, DType::BF16, Device::cuda(0), 90)).find("256"), std::string::npos);
  EXPECT_NE(reason(fp8_config(tok, 4096 + 8, 4096, DType::BF16, Device::cuda(0), 90)).find("16"), std::string::npos);
  EXPECT_FALSE(reason(fp8_config(tok, 4096, 4096, DType::BF16, Device::cpu(), 90)).empty());
  ScaledMMConfig c = fp8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.act = ActScheme::DynamicTokenGroup;
  c.act_group = 128;
  EXPECT_FALSE(reason(c).empty());
  c = fp8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.weight_scale = WeightScaleKind::Block;
  c.block_n = c.block_k = 128;
  EXPECT_FALSE(reason(c).empty());
  c = fp8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.weight_type = W8Type::Int8;
  EXPECT_FALSE(reason(c).empty());
  c = fp8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.act = ActScheme::None;
  EXPECT_FALSE(reason(c).empty());
}

TEST(CudaScaledMMFp8FastRegistry, SelectedFirstLtNext) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  auto& reg = ScaledMMKernelRegistry::instance();
  auto chosen = [&](const Fp8Variant& v, int64_t N, int64_t K) {
    return reg.select(fp8_config(v, N, K, DType::BF16, Device::cuda(0), 90), DeviceType::CUDA, "auto", "scaled-mm", "L")
        .second.chosen;
  };
  for (const Fp8Variant& v : testing::w8a8_variants()) {
    EXPECT_EQ(chosen(v, 6144, 4096), kName);
    EXPECT_EQ(chosen(v, 4096, 14336), kName);
    EXPECT_EQ(chosen(v, 4096, 4096 + 16), "cuda_scaled_mm_fp8_lt");  // K not a multiple of 256
  }
}

}  // namespace
}  // namespace qlm
