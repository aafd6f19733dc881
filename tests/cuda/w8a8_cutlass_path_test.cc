// W8A8CutlassPath's switches (kernels/cuda/w8a8_cutlass_path.h), checked without a GPU: a forced configuration
// names itself in the path (INT8 without a promotion interval), "off" leaves every M to the caller, an unknown
// configuration or a bad QLM_FP8_PROMOTION is refused with the names that would work, and a device other than
// compute capability 9.0 never takes the path. Its numerics run in the FP8 / INT8 fast-kernel GPU tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cuda/device.h"
#include "support/expect_error.h"
#include "support/scoped_env.h"

#ifdef QLM_WITH_CUDA
#include "kernels/cuda/fp8_cutlass_gemm.h"
#include "kernels/cuda/w8a8_cutlass_path.h"
#endif

namespace qlm {
namespace {

#ifdef QLM_WITH_CUDA

ScaledMMConfig layer(int capability) {
  ScaledMMConfig c;
  c.K_p = 4096;
  c.N_p = 4096;
  c.weight_type = W8Type::Int8;
  c.weight_scale = WeightScaleKind::Channel;
  c.act = ActScheme::DynamicToken;
  c.act_dtype = DType::BF16;
  c.device = Device::cuda(0);
  c.capability = capability;
  return c;
}

using testing::ScopedEnv;

TEST(W8A8CutlassPath, ForcedConfigurationNamesItself) {
  if (!cuda::fp8_cutlass_available()) GTEST_SKIP() << "CUTLASS sm_90a kernels not compiled in";
  {
    ScopedEnv s("QLM_INT8_CUTLASS_CONFIG", "swap128x64");
    const W8A8CutlassPath int8(layer(90), /*int8=*/true, "QLM_INT8", Tensor(), false);
    EXPECT_EQ(int8.path(17), std::optional<std::string>("cutlass swap128x64"));
    EXPECT_EQ(int8.path(1024), std::optional<std::string>("cutlass swap128x64"));
  }
  {
    ScopedEnv s("QLM_FP8_CUTLASS_CONFIG", "swap64x128c12");
    ScopedEnv p("QLM_FP8_PROMOTION", "8");
    ScaledMMConfig c = layer(90);
    c.weight_type = W8Type::Fp8E4M3;
    const W8A8CutlassPath fp8(c, /*int8=*/false, "QLM_FP8", Tensor(), false);
    EXPECT_EQ(fp8.path(300), std::optional<std::string>("cutlass swap64x128c12 p8"));
  }
}

TEST(W8A8CutlassPath, OffAndOtherDevicesLeaveEveryTokenCountToTheCaller) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  {
    ScopedEnv s("QLM_INT8_CUTLASS_CONFIG", "off");
    const W8A8CutlassPath off(layer(90), /*int8=*/true, "QLM_INT8", Tensor(), false);
    for (int64_t M : {17, 64, 256, 1024}) EXPECT_FALSE(off.path(M).has_value()) << M;
  }
  // sm_90a code runs on compute capability 9.0 only; F32 output has no CUTLASS instance.
  ScopedEnv s("QLM_INT8_CUTLASS_CONFIG", "swap128x32");
  const W8A8CutlassPath ampere(layer(80), /*int8=*/true, "QLM_INT8", Tensor(), false);
  const W8A8CutlassPath blackwell(layer(100), /*int8=*/true, "QLM_INT8", Tensor(), false);
  ScaledMMConfig f32 = layer(90);
  f32.act_dtype = DType::F32;
  const W8A8CutlassPath f32_out(f32, /*int8=*/true, "QLM_INT8", Tensor(), false);
  for (int64_t M : {17, 1024}) {
    EXPECT_FALSE(ampere.path(M).has_value()) << M;
    EXPECT_FALSE(blackwell.path(M).has_value()) << M;
    EXPECT_FALSE(f32_out.path(M).has_value()) << M;
  }
}

// The configuration rule: INT8 takes FP8's tiles where FP8 takes CUTLASS, 64-token tiles up to 128 tokens, and the
// 128 x 128 clusters where FP8 leaves larger M to cuBLASLt (132 SMs: an H100 / H200).
TEST(W8A8CutlassPath, Int8TakesCutlassWhereFp8LeavesTokensToCublasLt) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  using C = cuda::Fp8CutlassConfig;
  struct Case {
    int64_t M, N;
    std::optional<C> fp8, int8;
  };
  for (const Case& t :
       {Case{17, 4096, C::kSwap128x32, C::kSwap128x32}, Case{64, 28672, C::kSwap128x64, C::kSwap128x64},
        Case{96, 57344, std::nullopt, C::kSwap128x64}, Case{128, 10240, std::nullopt, C::kSwap128x64},
        Case{129, 10240, std::nullopt, C::kSwap128x128C12}, Case{256, 4096, C::kSwap64x128C12, C::kSwap64x128C12},
        Case{256, 6144, std::nullopt, C::kSwap128x128C12}, Case{1024, 4096, std::nullopt, C::kSwap128x128C12},
        Case{1024, 57344, std::nullopt, C::kSwap128x128C12}}) {
    const auto fp8 = cuda::fp8_cutlass_config_for(t.M, t.N, 132);
    const auto int8 = cuda::fp8_cutlass_config_for(t.M, t.N, 132, /*int8=*/true);
    EXPECT_EQ(fp8 ? std::optional<C>(fp8->config) : std::nullopt, t.fp8) << t.M << " x " << t.N;
    ASSERT_TRUE(int8.has_value()) << t.M << " x " << t.N;
    EXPECT_EQ(int8->config, *t.int8) << t.M << " x " << t.N;
  }
}

TEST(W8A8CutlassPath, BadSwitchesAreRefusedWithWhatWouldWork) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  {
    ScopedEnv s("QLM_INT8_CUTLASS_CONFIG", "swap256x256");
    EXPECT_QLM_ERROR(W8A8CutlassPath(layer(90), true, "QLM_INT8", Tensor(), false), "kernel.config",
                     "QLM_INT8_CUTLASS_CONFIG=swap256x256 names no CUTLASS configuration");
    EXPECT_QLM_ERROR(W8A8CutlassPath(layer(90), true, "QLM_INT8", Tensor(), false), "kernel.config",
                     "off, swap128x32, swap128x64, swap64x128c12, swap128x128c12");
  }
  ScopedEnv p("QLM_FP8_PROMOTION", "6");
  ScaledMMConfig c = layer(90);
  c.weight_type = W8Type::Fp8E4M3;
  EXPECT_QLM_ERROR(W8A8CutlassPath(c, false, "QLM_FP8", Tensor(), false), "kernel.config",
                   "QLM_FP8_PROMOTION=6 is not a positive multiple of 4");
  // INT8 sums are exact: the FP8 promotion switch does not apply and is not read.
  EXPECT_NO_THROW(W8A8CutlassPath(layer(90), true, "QLM_INT8", Tensor(), false));
}

#endif

}  // namespace
}  // namespace qlm
