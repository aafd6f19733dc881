// cuBLASLt algorithm tuning (kernels/cuda/lt_algo_tuner.h, LtGemm with autotune): the choice of the
// fastest candidate and the QLM_LT_AUTOTUNE override (CPU, built with the CUDA backend); on a GPU, a tuned
// bf16 GEMM against the float64 oracle and against the untuned one, a GEMM captured into a CUDA graph before
// any eager call (no tuning while capturing), and tuning shared by two GEMMs of one signature.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "cuda/device.h"
#include "kernels/dense_linear.h"
#include "support/scoped_env.h"
#include "tests/support/cuda_test_util.h"
#ifdef QLM_WITH_CUDA
#include "cuda/graph.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/lt_algo_tuner.h"
#endif

namespace qlm {
namespace {

using testing::normwise_error;
using testing::random_floats;

#ifdef QLM_WITH_CUDA

using testing::ScopedEnv;

TEST(LtAutotune, FastestCandidateSkipsRefusedOnes) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(cuda::fastest_candidate({}), -1);
  EXPECT_EQ(cuda::fastest_candidate({inf, inf}), -1);
  EXPECT_EQ(cuda::fastest_candidate({3.0, 2.0, 2.5}), 1);
  EXPECT_EQ(cuda::fastest_candidate({inf, 7.0, inf, 6.5}), 3);
  EXPECT_EQ(cuda::fastest_candidate({1.0, 1.0}), 0);  // ties keep the heuristic's order
}

TEST(LtAutotune, EnvironmentOverridesTheGemmDefault) {
  {
    ScopedEnv e("QLM_LT_AUTOTUNE", nullptr);
    EXPECT_TRUE(cuda::lt_autotune_enabled(true));
    EXPECT_FALSE(cuda::lt_autotune_enabled(false));
  }
  {
    ScopedEnv e("QLM_LT_AUTOTUNE", "");
    EXPECT_TRUE(cuda::lt_autotune_enabled(true));  // empty counts as unset
  }
  {
    ScopedEnv e("QLM_LT_AUTOTUNE", "0");
    EXPECT_FALSE(cuda::lt_autotune_enabled(true));
  }
  {
    ScopedEnv e("QLM_LT_AUTOTUNE", "1");
    EXPECT_TRUE(cuda::lt_autotune_enabled(false));
  }
}

class CudaLtAutotune : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  }
  static cuda::LtGemmSpec bf16_spec(int64_t N, int64_t K, bool autotune) {
    cuda::LtGemmSpec s;
    s.a_type = s.b_type = s.d_type = CUDA_R_16BF;
    s.N = N;
    s.K = K;
    s.autotune = autotune;
    s.what = "bf16 test";
    return s;
  }
};

// y = x W^T through LtGemm, bf16 everywhere, compared with the float64 oracle on the bf16-rounded operands.
TEST_F(CudaLtAutotune, TunedGemmMatchesOracleAndUntuned) {
  ScopedEnv env("QLM_LT_AUTOTUNE", nullptr);
  const Device dev = Device::cuda(0);
  const int64_t K = 520, N = 1000;
  const Tensor w = Tensor::from_vector(random_floats(static_cast<size_t>(N * K), 11), {N, K}).to(DType::BF16);
  const Tensor w_dev = w.to_device(dev);
  DenseLinearConfig rc{
      .K_p = K, .N_p = N, .weight_dtype = DType::F32, .act_dtype = DType::F32, .device = Device::cpu()};
  auto ref = DenseKernelRegistry::instance().find("cpu_ref")->create(rc);
  ref->prepare(w.to(DType::F32));
  cuda::LtGemm tuned(0, bf16_spec(N, K, true)), plain(0, bf16_spec(N, K, false));
  for (int64_t M : {1, 37, 300}) {
    const Tensor x = Tensor::from_vector(random_floats(static_cast<size_t>(M * K), M), {M, K}).to(DType::BF16);
    Tensor want = Tensor::empty({M, N}, DType::F32);
    ref->run(x.to(DType::F32), want, nullptr);
    const Tensor x_dev = x.to_device(dev);
    Tensor y1 = Tensor::zeros({M, N}, DType::BF16, dev), y2 = Tensor::zeros({M, N}, DType::BF16, dev);
    tuned.run(w_dev.raw_data(), x_dev.raw_data(), y1.raw_data(), M, nullptr, nullptr, nullptr);
    tuned.run(w_dev.raw_data(), x_dev.raw_data(), y1.raw_data(), M, nullptr, nullptr, nullptr);  // tuned plan again
    plain.run(w_dev.raw_data(), x_dev.raw_data(), y2.raw_data(), M, nullptr, nullptr, nullptr);
    const std::vector<float> a = y1.to_device(Device::cpu()).to_float_vector();
    const std::vector<float> b = y2.to_device(Device::cpu()).to_float_vector();
    EXPECT_LE(normwise_error(a, want.to_float_vector()), 5e-3) << "M=" << M;
    EXPECT_LE(normwise_error(a, b), 1e-2) << "M=" << M;
  }
}

// The first call of an M inside a graph capture cannot tune (no synchronisation while capturing): it is
// captured with the heuristic's algorithm, the replay is right, and a later eager call tunes.
TEST_F(CudaLtAutotune, CaptureBeforeAnyEagerCallRunsUntuned) {
  ScopedEnv env("QLM_LT_AUTOTUNE", nullptr);
  const Device dev = Device::cuda(0);
  const int64_t K = 256, N = 384, M = 19;
  const Tensor w = Tensor::from_vector(random_floats(static_cast<size_t>(N * K), 5), {N, K}).to(DType::BF16);
  const Tensor x = Tensor::from_vector(random_floats(static_cast<size_t>(M * K), 6), {M, K}).to(DType::BF16);
  DenseLinearConfig rc{
      .K_p = K, .N_p = N, .weight_dtype = DType::F32, .act_dtype = DType::F32, .device = Device::cpu()};
  auto ref = DenseKernelRegistry::instance().find("cpu_ref")->create(rc);
  ref->prepare(w.to(DType::F32));
  Tensor want = Tensor::empty({M, N}, DType::F32);
  ref->run(x.to(DType::F32), want, nullptr);
  const Tensor w_dev = w.to_device(dev), x_dev = x.to_device(dev);
  Tensor y = Tensor::zeros({M, N}, DType::BF16, dev);
  cuda::LtGemm gemm(0, bf16_spec(N, K, true));
  std::string why;
  auto graph = cuda::CapturedGraph::capture(
      0, [&] { gemm.run(w_dev.raw_data(), x_dev.raw_data(), y.raw_data(), M, nullptr, nullptr, nullptr); }, &why);
  ASSERT_TRUE(graph) << why;
  graph->launch();
  EXPECT_LE(normwise_error(y.to_device(Device::cpu()).to_float_vector(), want.to_float_vector()), 5e-3);
  Tensor y2 = Tensor::zeros({M, N}, DType::BF16, dev);
  gemm.run(w_dev.raw_data(), x_dev.raw_data(), y2.raw_data(), M, nullptr, nullptr, nullptr);  // tunes now
  EXPECT_LE(normwise_error(y2.to_device(Device::cpu()).to_float_vector(), want.to_float_vector()), 5e-3);
}

#endif  // QLM_WITH_CUDA

}  // namespace
}  // namespace qlm
