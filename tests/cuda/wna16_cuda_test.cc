// `cuda_wna16` against the float64 CPU oracle (cpu_ref) on the same standard-form weights and the
// same activations (rounded to the activation dtype first). Suites named Cuda* need a GPU and skip
// without one; the others check the registration and the host-side repacking on any machine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "kernels/cuda/wna16_layout.h"
#include "kernels/mp_linear.h"
#include "tests/kernels/wna16_random.h"
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

using testing::normwise_error;
using testing::Wna16Spec;

constexpr double kF32Tolerance = 1e-4;   // normwise, F32 activations (no TF32)
constexpr double kHalfTolerance = 1e-2;  // mean relative, F16 / BF16 activations and output

class CudaWna16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto devices = cuda_devices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    capability_ = devices[0].capability;
  }

  // Runs one weight set through cuda_wna16 for every M and compares with cpu_ref.
  void check(const Wna16Spec& spec, DType act, const std::vector<int64_t>& Ms) {
    SCOPED_TRACE(fmt::format("{} act={}", testing::wna16_spec_str(spec), dtype_name(act)));
    const auto gen = testing::random_wna16(spec);
    const size_t bytes =
        testing::run_wna16_against_cpu_ref("cuda_wna16", spec, gen.weights, act, Device::cuda(0), capability_, Ms,
                                           [&](int64_t, const std::vector<float>& got, const std::vector<float>& want) {
                                             if (act == DType::F32)
                                               EXPECT_LE(normwise_error(got, want), kF32Tolerance);
                                             else
                                               EXPECT_LE(testing::mean_relative_error(got, want), kHalfTolerance);
                                           });
    EXPECT_GE(bytes, static_cast<size_t>(gen.weights.qweight.nbytes() + gen.weights.scales.nbytes()));
  }

  int capability_ = 0;
};

using testing::Wna16GridParam;

class CudaWna16Grid : public CudaWna16Test, public ::testing::WithParamInterface<Wna16GridParam> {};

// Every weight configuration in every act dtype, each with one GEMV M (<= 8) and one cuBLAS M
// (> 8) taken in rotation, so every M of both lists occurs across the grid.
TEST_P(CudaWna16Grid, MatchesReference) {
  const auto p = GetParam();
  const int index = p.bits * 100 + static_cast<int>(p.group) + p.zp * 2 + p.act;
  Wna16Spec s;
  s.bits = p.bits;
  s.K = index % 2 ? 1152 : 384;  // both divisible by 32, 96 and 128
  const int64_t Ns[] = {200, 328, 203};
  s.N = Ns[index % 3];
  s.group_size = p.group;
  s.zero_points = p.zp;
  s.act_order = p.act;
  s.seed = static_cast<uint64_t>(index + 11);
  const int64_t small[] = {1, 3, 2, 4, 5, 6, 7, 8};
  const int64_t large[] = {17, 64, 129, 300, 9};
  int a = 0;
  for (DType act : {DType::F32, DType::BF16, DType::F16}) {
    check(s, act, {small[(index + a) % 8], large[(index + a) % 5]});
    ++a;
  }
}

INSTANTIATE_TEST_SUITE_P(CudaAll, CudaWna16Grid,
                         ::testing::ValuesIn(testing::wna16_grid({2, 3, 4, 8}, {-1, 32, 96, 128})),
                         [](const auto& info) { return testing::wna16_grid_name(info.param); });

// Every M of the brief's list on one configuration, all act dtypes.
TEST_F(CudaWna16Test, EveryM) {
  for (DType act : {DType::F32, DType::BF16, DType::F16})
    check({.bits = 4, .K = 1152, .N = 328, .group_size = 128, .zero_points = true, .act_order = true, .seed = 3}, act,
          {1, 3, 17, 64, 129, 300});
}

// Groups that are not whole chunks (padding rows inside the layout), odd K and tiny or odd N.
TEST_F(CudaWna16Test, PaddedGroupsAndOddShapes) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = false, .act_order = false, .seed = 2},
      {.bits = 2, .K = 120, .N = 70, .group_size = 40, .zero_points = false, .act_order = true, .seed = 3},
      {.bits = 3, .K = 101, .N = 31, .group_size = -1, .zero_points = true, .act_order = false, .seed = 4},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 5},
      {.bits = 8, .K = 7, .N = 1, .group_size = -1, .zero_points = false, .act_order = false, .seed = 6},
      {.bits = 4, .K = 1, .N = 5, .group_size = -1, .zero_points = true, .act_order = false, .seed = 7},
      {.bits = 3, .K = 96, .N = 65, .group_size = 32, .zero_points = false, .act_order = true, .seed = 8},
  };
  for (const auto& s : specs) {
    check(s, DType::F32, {1, 2, 5, 8, 9, 29});
    check(s, DType::BF16, {3, 15});
  }
}

// Long K and wide N: the GEMV splits K over many blocks and many column tiles.
TEST_F(CudaWna16Test, SplitKGemv) {
  check({.bits = 4, .K = 4096, .N = 1000, .group_size = 128, .zero_points = true, .act_order = true, .seed = 10},
        DType::F32, {1, 3, 8});
  check({.bits = 8, .K = 6144, .N = 300, .group_size = -1, .seed = 11}, DType::BF16, {1, 6, 40});
  check({.bits = 3, .K = 5120, .N = 520, .group_size = 128, .zero_points = true, .seed = 12}, DType::F16, {2, 7});
}

// 4/8-bit BF16/F16 layers go to cuda_wna16_fast on capability >= 80; cuda_wna16 takes the rest
// (2/3-bit, F32 activations).
TEST_F(CudaWna16Test, SelectedForCudaLayers) {
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 1024, .group_size = 128};
  auto [fast, fast_sel] =
      MPKernelRegistry::instance().select(testing::wna16_config(s, DType::BF16, Device::cuda(0), capability_),
                                          DeviceType::CUDA, "auto", "mixed-precision linear", "l");
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->name, capability_ >= 80 ? "cuda_wna16_fast" : "cuda_wna16");
  const Wna16Spec s3{.bits = 3, .K = 4096, .N = 1024, .group_size = 128};
  auto [slow, slow_sel] =
      MPKernelRegistry::instance().select(testing::wna16_config(s3, DType::BF16, Device::cuda(0), capability_),
                                          DeviceType::CUDA, "auto", "mixed-precision linear", "l");
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->name, "cuda_wna16");
}

TEST_F(CudaWna16Test, WrongArgumentsAreRejected) {
  const Wna16Spec s{.bits = 4, .K = 64, .N = 32, .group_size = 32, .seed = 5};
  const auto gen = testing::random_wna16(s);
  const auto cfg = testing::wna16_config(s, DType::F16, Device::cuda(0), capability_);
  auto kernel = MPKernelRegistry::instance().find("cuda_wna16")->create(cfg);
  kernel->prepare(gen.weights);
  Tensor y = Tensor::zeros({2, 32}, DType::F16, Device::cuda(0));
  Tensor x_wrong_k = Tensor::zeros({2, 63}, DType::F16, Device::cuda(0));
  EXPECT_THROW(kernel->run(x_wrong_k, y, nullptr), Error);
  Tensor x_wrong_dtype = Tensor::zeros({2, 64}, DType::F32, Device::cuda(0));
  EXPECT_THROW(kernel->run(x_wrong_dtype, y, nullptr), Error);
  Tensor x_host = Tensor::zeros({2, 64}, DType::F16);
  EXPECT_THROW(kernel->run(x_host, y, nullptr), Error);
}

// ---- No GPU needed ----

TEST(Wna16CudaRegistry, ListedForCudaInCudaBuilds) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const auto* e = MPKernelRegistry::instance().find("cuda_wna16");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->device, DeviceType::CUDA);
  EXPECT_EQ(e->backend, "cuda");
}

TEST(Wna16CudaRegistry, CanImplementGivesReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const auto* e = MPKernelRegistry::instance().find("cuda_wna16");
  ASSERT_TRUE(e);
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 1024, .group_size = 128};
  const auto ok = testing::wna16_config(s, DType::BF16, Device::cuda(0), 90);
  EXPECT_FALSE(e->can_implement(ok).has_value());
  for (DType act : {DType::F32, DType::F16}) {
    auto c = ok;
    c.act_dtype = act;
    c.capability = 70;
    EXPECT_FALSE(e->can_implement(c).has_value()) << dtype_name(act);
  }

  auto expect_reason = [&](MPLinearLayerConfig c, const std::string& fragment) {
    const auto why = e->can_implement(c);
    ASSERT_TRUE(why.has_value()) << c.describe();
    EXPECT_NE(why->find(fragment), std::string::npos) << *why;
  };
  auto c = ok;
  c.device = Device::cpu();
  expect_reason(c, "CUDA only");
  c = ok;
  c.capability = 61;
  expect_reason(c, "capability");
  c = ok;
  c.capability = 0;
  expect_reason(c, "capability");
  c = ok;
  c.capability = 75;  // BF16 needs 8.0
  expect_reason(c, "BF16");
  c = ok;
  c.weight_type = PackedIntType{5, 16};
  expect_reason(c, "bits");
  c = ok;
  c.act_dtype = DType::F8_E4M3;
  expect_reason(c, "activation dtype");
  c = ok;
  c.group_size = 0;
  expect_reason(c, "group size");
  c = ok;
  c.N_p = 0;
  expect_reason(c, "empty partition");
}

TEST(Wna16CudaRegistry, SelectedForCudaConfig) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const Wna16Spec s{.bits = 3, .K = 4096, .N = 1000, .group_size = 128, .zero_points = true, .act_order = true};
  const auto cfg = testing::wna16_config(s, DType::F16, Device::cuda(0), 90);
  auto [entry, sel] = MPKernelRegistry::instance().select(cfg, DeviceType::CUDA, "cuda", "mixed-precision linear", "l");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->name, "cuda_wna16");
  EXPECT_EQ(sel.chosen, "cuda_wna16");
}

// The host-side repacking: every code of the layout equals the standard form's code of its source
// row, padding rows are -1 and fall on whole chunks of one group.
TEST(Wna16CudaLayout, RepackedCodesMatchStandardForm) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 384, .N = 203, .group_size = 128, .zero_points = true, .act_order = false, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 2},
      {.bits = 3, .K = 101, .N = 31, .group_size = -1, .zero_points = false, .act_order = false, .seed = 3},
      {.bits = 3, .K = 384, .N = 9, .group_size = 96, .zero_points = false, .act_order = true, .seed = 4},
      {.bits = 2, .K = 120, .N = 70, .group_size = 40, .zero_points = false, .act_order = true, .seed = 5},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 6},
      {.bits = 8, .K = 7, .N = 1, .group_size = -1, .zero_points = false, .act_order = false, .seed = 7},
  };
  for (const auto& s : specs) {
    SCOPED_TRACE(testing::wna16_spec_str(s));
    const auto gen = testing::random_wna16(s);
    const auto& w = gen.weights;
    const CudaWna16Layout L = pack_cuda_wna16(w);
    const int64_t chunk_rows = cuda_wna16_chunk_rows(s.bits);
    ASSERT_EQ(L.rows, L.chunks * chunk_rows);
    ASSERT_EQ(static_cast<int64_t>(L.row_source.size()), L.rows);
    ASSERT_EQ(L.N_pad % CudaWna16Layout::kColumnAlign, 0);
    ASSERT_GE(L.N_pad, s.N);
    std::vector<int> seen(static_cast<size_t>(s.K), 0);
    const int32_t* g_idx = w.g_idx.defined() ? w.g_idx.data<int32_t>() : nullptr;
    const int64_t gs = s.group_size < 0 ? s.K : s.group_size;
    for (int64_t j = 0; j < L.rows; ++j) {
      const int32_t r = L.row_source[j];
      if (r < 0) continue;
      ASSERT_LT(r, s.K);
      ++seen[r];
      const int32_t g = g_idx ? g_idx[r] : static_cast<int32_t>(r / gs);
      ASSERT_EQ(L.chunk_group[j / chunk_rows], g) << "row " << j;
      // The dequantized weight of packed row j equals the generator's float64 weight of row r.
      for (int64_t n = 0; n < s.N; ++n) {
        const double zero = L.zeros.empty() ? L.implied_zero : L.zeros[g * L.N_pad + n];
        const double v = (static_cast<double>(cuda_wna16_code(L, j, n)) - zero) * L.scales[g * L.N_pad + n];
        ASSERT_DOUBLE_EQ(v, gen.dequant[r * s.N + n]) << "row " << j << " column " << n;
      }
    }
    for (int64_t k = 0; k < s.K; ++k) ASSERT_EQ(seen[k], 1) << "input row " << k;
    for (int64_t g = 0; g < L.groups; ++g)
      for (int64_t n = s.N; n < L.N_pad; ++n) ASSERT_EQ(L.scales[g * L.N_pad + n], 0.0f);
  }
}

}  // namespace
}  // namespace qlm
