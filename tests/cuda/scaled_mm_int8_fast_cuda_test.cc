// cuda_scaled_mm_int8_fast against the CPU oracle (cpu_ref) on the same weights and activations (rounded to the
// activation dtype first): tensor / channel weight scales x symmetric static / dynamic per-tensor / dynamic
// per-token activations x BF16 / F16 / F32, every path (the weight-streaming kernel, forced for every M through
// QLM_INT8_FAST_MAX_M; the default rule, which hands M > 16 to the CUTLASS GEMM on sm_90 or else to cuBLASLt; every
// CUTLASS tile configuration and the cuBLASLt path, forced through QLM_INT8_CUTLASS_CONFIG), poisoned outputs; the GEMM
// quantizing its own activations up to 4 tokens bit for bit against the quantizer + GEMM pair; its can_implement
// reasons. Suites named Cuda* need a GPU for the numeric tests and skip without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/float_convert.h"
#include "cuda/device.h"
#include "kernels/scaled_mm.h"
#include "support/scaled_mm_test_data.h"
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

constexpr const char* kName = "cuda_scaled_mm_int8_fast";

using Int8Variant = testing::W8A8Variant;

ScaledMMConfig int8_config(const Int8Variant& v, int64_t N, int64_t K, DType act, Device device, int capability) {
  return testing::w8a8_variant_config(W8Type::Int8, v, N, K, act, device, capability);
}

#ifdef QLM_WITH_CUDA

void check_shape(const Int8Variant& v, int64_t N, int64_t K, const std::vector<DType>& dtypes,
                 const std::vector<int64_t>& Ms) {
  testing::check_w8a8_streaming_kernel(kName, "QLM_INT8", W8Type::Int8, v, N, K, dtypes, Ms, /*weight_seed=*/5,
                                       /*act_seed_mul=*/3);
}

class CudaScaledMMInt8FastTest : public ::testing::TestWithParam<Int8Variant> {};

TEST_P(CudaScaledMMInt8FastTest, MatchesCpuRef) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 80) GTEST_SKIP() << "INT8 mma.sync m16n8k32 needs capability >= 80";
  const std::vector<int64_t> Ms = {1, 3, 4, 5, 16, 17, 64, 129, 257};
  // N not a multiple of the 128-row block (idle warps); K of 2 and 5 steps (odd K splits).
  check_shape(GetParam(), 144, 512, {DType::BF16, DType::F16, DType::F32}, Ms);
  check_shape(GetParam(), 272, 1280, {DType::BF16, DType::F16}, Ms);
}

INSTANTIATE_TEST_SUITE_P(All, CudaScaledMMInt8FastTest, ::testing::ValuesIn(testing::w8a8_variants()),
                         [](const auto& info) { return testing::w8a8_variant_name(info.param); });

// Llama-sized K: long int32 accumulations, K split across many blocks.
TEST(CudaScaledMMInt8FastLarge, LongReductions) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 80) GTEST_SKIP() << "INT8 mma.sync m16n8k32 needs capability >= 80";
  check_shape({WeightScaleKind::Channel, ActScheme::DynamicToken}, 256, 4096, {DType::BF16}, {1, 16, 64});
  check_shape({WeightScaleKind::Tensor, ActScheme::DynamicToken}, 128, 14336, {DType::BF16}, {1, 2, 17});
}

// The GEMM quantizing its own activations: bit for bit the output of
// its quantizer, GEMM and reduction kernels (testing::check_quantizing_in_the_gemm).
TEST(CudaScaledMMInt8FastFused, QuantizingInTheGemmIsBitIdentical) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  if (cuda_capability(0) < 80) GTEST_SKIP() << "INT8 mma.sync m16n8k32 needs capability >= 80";
  testing::check_quantizing_in_the_gemm(W8Type::Int8, kName, "QLM_INT8");
}

// The per-token quantizer FP8 uses, with INT8 codes (the path of every M above the in-GEMM bound): codes and scales
// bit-identical to the CPU quantizer for rows held in registers (1, 2, 4, 8 and 16 vectors of 8 per thread) and rows
// read twice (K = 40000, and F32 from K = 16392), an all-zero row included.
TEST(CudaScaledMMInt8FastQuant, PerTokenCodesMatchCpuBitExactly) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  for (DType act : {DType::F32, DType::BF16, DType::F16})
    for (int64_t M : {1, 5, 130})
      for (int64_t K : {8, 264, 2056, 4096, 14336, 16392, 28672, 40000}) {
        std::vector<float> x = testing::scaled_mm_test_acts(M, K, act, 29 + M + K);
        if (M > 1) std::fill(x.begin() + K, x.begin() + 2 * K, 0.0f);  // row 1 all zero: scale 0, codes 0
        const std::string what = fmt::format("{} M={} K={}", dtype_name(act), M, K);
        const testing::TokenCodes got =
            testing::gpu_token_codes(x, M, K, act, /*int8=*/true, /*pdl=*/(M + K / 8) % 2 == 0);
        const testing::TokenCodes want = testing::cpu_token_codes(x, M, K, act, /*int8=*/true);
        ASSERT_EQ(got.scales, want.scales) << what;
        for (size_t i = 0; i < want.codes.size(); ++i)
          ASSERT_EQ(got.codes[i], want.codes[i]) << what << " element " << i;
      }
}

// Every rounding case of the INT8 codes: a row whose absmax is 127 has scale 1, so its values are rounded as they are:
// every integer of the range, every midpoint (ties to even: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2), one float either side of
// each midpoint, tiny values and signed zeros — the CPU quantizer's codes, and std::nearbyint's.
TEST(CudaScaledMMInt8FastQuant, EveryRoundingCaseMatchesCpu) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> row = {127.0f, -0.0f, 0.0f, std::numeric_limits<float>::denorm_min(), 1e-30f, -1e-30f};
  for (int i = -127; i <= 127; ++i) row.push_back(static_cast<float>(i));
  for (int i = -127; i < 127; ++i) {
    const float mid = static_cast<float>(i) + 0.5f;
    for (float v : {mid, std::nextafter(mid, -1000.0f), std::nextafter(mid, 1000.0f)}) row.push_back(v);
  }
  while (row.size() % 8 != 0) row.push_back(0.0f);
  const int64_t K = static_cast<int64_t>(row.size());
  const testing::TokenCodes got = testing::gpu_token_codes(row, 1, K, DType::F32, /*int8=*/true, /*pdl=*/false);
  const testing::TokenCodes want = testing::cpu_token_codes(row, 1, K, DType::F32, /*int8=*/true);
  ASSERT_EQ(got.scales, std::vector<float>{1.0f});
  ASSERT_EQ(want.scales, std::vector<float>{1.0f});
  for (int64_t i = 0; i < K; ++i) {
    const float v = row[static_cast<size_t>(i)];
    ASSERT_EQ(got.codes[static_cast<size_t>(i)], want.codes[static_cast<size_t>(i)]) << "value " << v;
    ASSERT_EQ(static_cast<int8_t>(got.codes[static_cast<size_t>(i)]), static_cast<int8_t>(std::nearbyint(v)))
        << "value " << v;
  }
}

#endif

// ---- registration (any machine with the backend built) ----

TEST(CudaScaledMMInt8FastRegistry, CanImplementGivesReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  const auto* e = ScaledMMKernelRegistry::instance().find(kName);
  ASSERT_TRUE(e != nullptr);
  EXPECT_EQ(e->device, DeviceType::CUDA);
  for (const Int8Variant& v : testing::w8a8_variants())
    for (DType act : {DType::BF16, DType::F16, DType::F32})
      EXPECT_FALSE(e->can_implement(int8_config(v, 4096, 14336, act, Device::cuda(0), 80)).has_value());
  const Int8Variant tok{WeightScaleKind::Channel, ActScheme::DynamicToken};
  auto reason = [&](const ScaledMMConfig& c) {
    const auto r = e->can_implement(c);
    return r ? *r : std::string();
  };
  EXPECT_NE(reason(int8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 75)).find("80"), std::string::npos);
  EXPECT_NE(reason(int8_config(tok, 4096, 4096 + 16, DType::BF16, Device::cuda(0), 90)).find("256"), std::string::npos);
  EXPECT_NE(reason(int8_config(tok, 4096 + 8, 4096, DType::BF16, Device::cuda(0), 90)).find("16"), std::string::npos);
  EXPECT_NE(reason(int8_config(tok, 4096, 131072 + 256, DType::BF16, Device::cuda(0), 90)).find("131072"),
            std::string::npos);
  ScaledMMConfig c = int8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.act_symmetric = false;
  EXPECT_NE(reason(c).find("symmetric"), std::string::npos);
  c = int8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.weight_type = W8Type::Fp8E4M3;
  EXPECT_FALSE(reason(c).empty());
  c = int8_config(tok, 4096, 4096, DType::BF16, Device::cuda(0), 90);
  c.act = ActScheme::None;
  EXPECT_FALSE(reason(c).empty());
}

}  // namespace
}  // namespace qlm
