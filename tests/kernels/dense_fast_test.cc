// cpu_fast_dense against a float64 reference over F32/BF16/F16 weights, odd shapes, M from 1 to 129,
// 1 and 2 threads, bias on/off, NaN-poisoned outputs.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/dense_linear.h"
#include "tests/kernels/wna16_random.h"

namespace qlm {
namespace {

void check_dense(DType dtype, int64_t K, int64_t N, const std::vector<int64_t>& Ms) {
  SCOPED_TRACE(fmt::format("{} K={} N={}", dtype_name(dtype), K, N));
  const Tensor w32 = Tensor::from_vector(testing::random_floats(static_cast<size_t>(N * K), K * 7 + N), {N, K});
  const Tensor w = w32.to(dtype);
  const std::vector<float> wf = w.to_float_vector();  // exactly what the kernel sees
  std::vector<double> wkn(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) wkn[k * N + n] = wf[n * K + k];

  DenseLinearConfig cfg{.K_p = K, .N_p = N, .weight_dtype = dtype, .act_dtype = DType::F32};
  const auto* entry = DenseKernelRegistry::instance().find("cpu_fast_dense");
  ASSERT_TRUE(entry);
  ASSERT_FALSE(entry->can_implement(cfg).has_value());
  auto kernel = entry->create(cfg);
  kernel->prepare(w);
  const Tensor bias = Tensor::from_vector(testing::random_floats(N, 5), {N});
  for (int64_t M : Ms) {
    SCOPED_TRACE(fmt::format("M={}", M));
    const auto xv = testing::random_floats(static_cast<size_t>(M * K), M + 3);
    const Tensor x = Tensor::from_vector(xv, {M, K});
    const bool with_bias = M % 2 == 0;
    const auto want = testing::matmul_f64(xv, wkn, with_bias ? bias.data<float>() : nullptr, M, K, N);
    for (int threads : {1, 2}) {
      set_compute_threads(threads);
      Tensor y = Tensor::empty({M, N}, DType::F32);
      std::fill(y.span<float>().begin(), y.span<float>().end(), std::numeric_limits<float>::quiet_NaN());
      kernel->run(x, y, with_bias ? &bias : nullptr);
      ASSERT_EQ(testing::first_non_finite(y.data<float>(), M * N), -1) << "threads=" << threads;
      EXPECT_LE(testing::normwise_error(y.data<float>(), want), 1e-5) << "threads=" << threads;
    }
  }
  set_compute_threads(0);
}

TEST(DenseFastKernel, MatchesFloat64Reference) {
  if (!cpu_features().avx2_fma) GTEST_SKIP() << "needs AVX2";
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (auto [K, N] : std::vector<std::pair<int64_t, int64_t>>{{384, 257}, {100, 200}, {7, 33}, {1, 1}, {513, 31}, {4096, 70}})
      check_dense(dt, K, N, {1, 2, 3, 4, 5, 7, 17, 33, 100, 129});
}

TEST(DenseFastKernel, RejectsOtherDtypes) {
  const auto* entry = DenseKernelRegistry::instance().find("cpu_fast_dense");
  ASSERT_TRUE(entry);
  DenseLinearConfig cfg{.K_p = 8, .N_p = 8, .weight_dtype = DType::F8_E4M3};
  EXPECT_TRUE(entry->can_implement(cfg).has_value());
  cfg.weight_dtype = DType::F32;
  cfg.device = Device::cuda();
  EXPECT_TRUE(entry->can_implement(cfg).has_value());
}

}  // namespace
}  // namespace qlm
