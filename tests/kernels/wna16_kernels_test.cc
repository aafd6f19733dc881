// Every CPU mixed-precision kernel against the float64 oracle: cpu_ref against a naive dequantizer
// of the generated codes, every cpu_fast kernel against cpu_ref. Grid: bits 2/3/4/8, channelwise
// and grouped (incl. groups that are not multiples of a packed word), zero points, act-order, odd
// M, K and N, 1 and 2 threads, bias on/off, output poisoned with NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/mp_linear.h"
#include "tests/kernels/wna16_random.h"

namespace qlm {
namespace {

using testing::Wna16Spec;

constexpr double kFastTolerance = 1e-5;  // normwise, against the double reference
constexpr double kRefTolerance = 2e-7;   // cpu_ref rounds a double result to f32 once

MPLinearLayerConfig config_for(const Wna16Spec& s) {
  MPLinearLayerConfig c;
  c.K = c.K_p = s.K;
  c.N = c.N_p = s.N;
  const int bias = 1 << (s.bits - 1);
  c.weight_type = PackedIntType{s.bits, s.zero_points ? 0 : bias};
  c.zero_points = s.zero_points;
  c.has_g_idx = s.act_order;
  c.group_size = s.group_size;
  c.act_dtype = DType::F32;
  c.device = Device::cpu();
  return c;
}

std::unique_ptr<MPLinearKernel> make_kernel(const std::string& name, const MPLinearLayerConfig& c,
                                            const WNA16Weights& w) {
  const auto* entry = MPKernelRegistry::instance().find(name);
  if (!entry) return nullptr;
  if (auto why = entry->can_implement(c)) {
    ADD_FAILURE() << name << " cannot implement " << c.describe() << ": " << *why;
    return nullptr;
  }
  auto kernel = entry->create(c);
  kernel->prepare(w);
  return kernel;
}

std::vector<std::string> fast_kernels() {
  std::vector<std::string> names;
  if (cpu_features().avx512_vnni) names.push_back("cpu_fast_avx512_vnni");
  if (cpu_features().avx512) names.push_back("cpu_fast_avx512");
  if (cpu_features().avx2_fma) names.push_back("cpu_fast_avx2");
  return names;
}

std::string spec_str(const Wna16Spec& s) {
  return fmt::format("bits={} K={} N={} group={} zp={} act_order={}", s.bits, s.K, s.N, s.group_size, s.zero_points,
                     s.act_order);
}

// Runs one weight set through every kernel for every M and thread count.
void check_all_kernels(const Wna16Spec& spec, const std::vector<int64_t>& Ms) {
  SCOPED_TRACE(spec_str(spec));
  auto gen = testing::random_wna16(spec);
  const auto cfg = config_for(spec);
  auto ref = make_kernel("cpu_ref", cfg, gen.weights);
  ASSERT_TRUE(ref);
  std::vector<std::unique_ptr<MPLinearKernel>> fast;
  for (const auto& name : fast_kernels()) fast.push_back(make_kernel(name, cfg, gen.weights));

  const int64_t K = spec.K, N = spec.N;
  const Tensor bias = Tensor::from_vector(testing::random_floats(N, spec.seed + 99), {N});
  for (int64_t M : Ms) {
    SCOPED_TRACE(fmt::format("M={}", M));
    const auto xv = testing::random_floats(static_cast<size_t>(M * K), spec.seed * 31 + M);
    const Tensor x = Tensor::from_vector(xv, {M, K});
    const bool with_bias = M % 2 == 1;
    const Tensor* b = with_bias ? &bias : nullptr;
    const auto want = testing::matmul_f64(xv, gen.dequant, with_bias ? bias.data<float>() : nullptr, M, K, N);

    Tensor y_ref = Tensor::empty({M, N}, DType::F32);
    std::fill(y_ref.span<float>().begin(), y_ref.span<float>().end(), std::numeric_limits<float>::quiet_NaN());
    ref->run(x, y_ref, b);
    ASSERT_EQ(testing::first_non_finite(y_ref.data<float>(), M * N), -1);
    EXPECT_LE(testing::normwise_error(y_ref.data<float>(), want), kRefTolerance);

    std::vector<double> ref_out(y_ref.data<float>(), y_ref.data<float>() + M * N);
    for (size_t i = 0; i < fast.size(); ++i) {
      if (!fast[i]) continue;
      for (int threads : {1, 2}) {
        SCOPED_TRACE(fmt::format("{} threads={}", fast[i]->name(), threads));
        set_compute_threads(threads);
        Tensor y = Tensor::empty({M, N}, DType::F32);
        std::fill(y.span<float>().begin(), y.span<float>().end(), std::numeric_limits<float>::quiet_NaN());
        fast[i]->run(x, y, b);
        const int64_t bad = testing::first_non_finite(y.data<float>(), M * N);
        ASSERT_EQ(bad, -1) << "element " << bad << " not written";
        EXPECT_LE(testing::normwise_error(y.data<float>(), ref_out), kFastTolerance);
        EXPECT_LE(testing::normwise_error(y.data<float>(), want), kFastTolerance);
      }
    }
  }
  set_compute_threads(0);
}

using testing::Wna16GridParam;

class Wna16KernelGrid : public ::testing::TestWithParam<Wna16GridParam> {};

TEST_P(Wna16KernelGrid, MatchesReference) {
  const auto p = GetParam();
  Wna16Spec s;
  s.bits = p.bits;
  s.K = 384;  // divisible by 32, 48, 64, 128
  s.N = (p.bits + p.group) % 2 ? 257 : 200;
  s.group_size = p.group;
  s.zero_points = p.zp;
  s.act_order = p.act;
  s.seed = static_cast<uint64_t>(p.bits * 1000 + p.group * 4 + p.zp * 2 + p.act + 7);
  check_all_kernels(s, {1, 3, 7, 17, 33, 100, 129});
}

INSTANTIATE_TEST_SUITE_P(All, Wna16KernelGrid,
                         ::testing::ValuesIn(testing::wna16_grid({2, 3, 4, 8}, {-1, 32, 48, 64, 128})),
                         [](const auto& info) { return testing::wna16_grid_name(info.param); });

// Groups that are not whole packed words (padding inside the layout), odd K, tiny and odd N.
TEST(Wna16KernelShapes, PaddedGroupsAndOddShapes) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = false, .act_order = false, .seed = 2},
      {.bits = 2, .K = 120, .N = 70, .group_size = 40, .zero_points = false, .act_order = true, .seed = 3},
      {.bits = 3, .K = 101, .N = 31, .group_size = -1, .zero_points = true, .act_order = false, .seed = 4},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 5},
      {.bits = 8, .K = 7, .N = 1, .group_size = -1, .zero_points = false, .act_order = false, .seed = 6},
      {.bits = 4, .K = 1, .N = 5, .group_size = -1, .zero_points = true, .act_order = false, .seed = 7},
      {.bits = 3, .K = 96, .N = 65, .group_size = 32, .zero_points = false, .act_order = true, .seed = 8},
      {.bits = 4, .K = 1152, .N = 96, .group_size = 128, .zero_points = false, .act_order = true, .seed = 9},
  };
  for (const auto& s : specs) check_all_kernels(s, {1, 2, 4, 5, 15, 29});
}

// Large enough that the register (GEMV) path splits the tiles over both threads.
TEST(Wna16KernelShapes, ThreadedGemv) {
  check_all_kernels(
      {.bits = 4, .K = 4096, .N = 300, .group_size = 128, .zero_points = true, .act_order = true, .seed = 10},
      {1, 3, 8, 9});
  check_all_kernels({.bits = 8, .K = 2048, .N = 130, .group_size = -1, .seed = 11}, {1, 2, 6});
}

TEST(Wna16KernelSelection, FastKernelChosenFirstOnCpu) {
  Wna16Spec s{.bits = 4, .K = 4096, .N = 1024, .group_size = 128};
  const auto cfg = config_for(s);
  auto [entry, sel] = MPKernelRegistry::instance().select(cfg, DeviceType::CPU, "auto", "mixed-precision linear", "l");
  ASSERT_TRUE(entry);
  if (cpu_features().avx512_vnni) {
    EXPECT_EQ(entry->name, "cpu_fast_avx512_vnni");
  } else if (cpu_features().avx512) {
    EXPECT_EQ(entry->name, "cpu_fast_avx512");
  } else if (cpu_features().avx2_fma) {
    EXPECT_EQ(entry->name, "cpu_fast_avx2");
  }
  auto [ref, sel2] =
      MPKernelRegistry::instance().select(cfg, DeviceType::CPU, "cpu_ref", "mixed-precision linear", "l");
  EXPECT_EQ(ref->name, "cpu_ref");
  EXPECT_EQ(cfg.describe(), "uint4b8 K_p=4096 N_p=1024 group=128 zp=no act_order=no act=F32");
}

TEST(Wna16KernelSelection, RejectsCudaConfigsWithReasons) {
  Wna16Spec s{.bits = 4, .K = 256, .N = 256, .group_size = 128};
  auto cfg = config_for(s);
  cfg.device = Device::cuda();
  for (const char* name : {"cpu_ref", "cpu_fast_avx512_vnni", "cpu_fast_avx512", "cpu_fast_avx2"}) {
    const auto* e = MPKernelRegistry::instance().find(name);
    ASSERT_TRUE(e) << name;
    EXPECT_TRUE(e->can_implement(cfg).has_value()) << name;
  }
}

TEST(Wna16KernelArgs, WrongShapesAreRejected) {
  Wna16Spec s{.bits = 4, .K = 64, .N = 32, .group_size = 32};
  auto gen = testing::random_wna16(s);
  for (const auto& name : fast_kernels()) {
    auto k = make_kernel(name, config_for(s), gen.weights);
    Tensor x = Tensor::zeros({2, 63}, DType::F32);
    Tensor y = Tensor::zeros({2, 32}, DType::F32);
    EXPECT_THROW(k->run(x, y, nullptr), Error);
  }
}

}  // namespace
}  // namespace qlm
