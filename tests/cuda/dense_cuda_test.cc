// `cuda_cublas_dense` against the CPU dense oracle (cpu_ref, float64) on the weights the kernel
// computes with (converted to the activation dtype) and the same activations (rounded to it), through cuBLAS and
// through its GEMV for a few rows (forced on: dense_gemv.h). CudaDense* needs a GPU and skips without one;
// DenseCudaRegistry checks the registration and DenseGemvRule the GEMV's rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "kernels/dense_linear.h"
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/dense_gemv.h"
#endif
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

using testing::normwise_error;
using testing::random_floats;

int64_t first_non_finite(const std::vector<float>& y) {
  for (size_t i = 0; i < y.size(); ++i)
    if (!std::isfinite(y[i])) return static_cast<int64_t>(i);
  return -1;
}

// Normwise error bounds: F32 is exact-ish FP32 (no TF32); 16-bit outputs add one rounding.
double tolerance(DType act) { return act == DType::F32 ? 1e-5 : act == DType::F16 ? 1e-3 : 5e-3; }

void check_dense(DType weight_dtype, DType act, int64_t K, int64_t N,
                 const std::vector<int64_t>& rows = {1, 5, 33, 130, 300}) {
  const Device dev = Device::cuda(0);
  DenseLinearConfig c{.K_p = K,
                      .N_p = N,
                      .weight_dtype = weight_dtype,
                      .act_dtype = act,
                      .device = dev,
                      .capability = cuda_capability(0)};
  const auto* entry = DenseKernelRegistry::instance().find("cuda_cublas_dense");
  ASSERT_TRUE(entry != nullptr);
  ASSERT_FALSE(entry->can_implement(c).has_value()) << *entry->can_implement(c);
  const Tensor w = Tensor::from_vector(random_floats(static_cast<size_t>(N * K), K * 3 + N), {N, K}).to(weight_dtype);
  auto kernel = entry->create(c);
  kernel->prepare(w);

  // The oracle sees the weights as the kernel does: in the activation dtype.
  DenseLinearConfig rc{.K_p = K, .N_p = N, .weight_dtype = DType::F32, .act_dtype = DType::F32, .device = Device::cpu()};
  auto ref = DenseKernelRegistry::instance().find("cpu_ref")->create(rc);
  ref->prepare(w.to(act).to(DType::F32));
  const Tensor bias = Tensor::from_vector(random_floats(static_cast<size_t>(N), 9), {N});
  const Tensor bias_dev = bias.to_device(dev);

  for (int64_t M : rows) {
    const bool with_bias = M % 2 == 1;
    const std::string what = fmt::format("cuda_cublas_dense w={} act={} M={} K={} N={} bias={}", dtype_name(weight_dtype),
                                         dtype_name(act), M, K, N, with_bias);
    const Tensor x = Tensor::from_vector(random_floats(static_cast<size_t>(M * K), M + K), {M, K}).to(act);
    Tensor want = Tensor::empty({M, N}, DType::F32);
    ref->run(x.to(DType::F32), want, with_bias ? &bias : nullptr);

    Tensor y_host = Tensor::empty({M, N}, act);
    std::memset(y_host.raw_data(), 0xff, y_host.nbytes());  // NaN in every float dtype
    Tensor y = y_host.to_device(dev);
    kernel->run(x.to_device(dev), y, with_bias ? &bias_dev : nullptr);
    const std::vector<float> got = y.to_device(Device::cpu()).to_float_vector();
    ASSERT_EQ(first_non_finite(got), -1) << what;
    EXPECT_LE(normwise_error(got, want.to_float_vector()), tolerance(act)) << what;
  }
}

TEST(CudaDenseTest, MatchesCpuRef) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  for (DType act : {DType::F32, DType::BF16, DType::F16})
    for (DType wt : {DType::F32, DType::BF16, DType::F16})
      for (auto [K, N] : std::vector<std::pair<int64_t, int64_t>>{{384, 257}, {100, 200}, {7, 33}, {4096, 70}, {1, 1}})
        check_dense(wt, act, K, N);
}

#ifdef QLM_WITH_CUDA
// The GEMV forced on at 1-4 rows: 16-byte vectors (K a multiple of 8 / 4 elements), single elements (K = 7, 100 for
// the 16-bit types), more vectors than one batch of loads (K = 4104 BF16: 513 vectors), thin and one-column layers.
TEST(CudaDenseTest, GemvMatchesCpuRef) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  struct Reset {
    ~Reset() { cuda::set_dense_gemv(-1); }
  } reset;
  cuda::set_dense_gemv(1);
  for (DType act : {DType::F32, DType::BF16, DType::F16})
    for (auto [K, N] : std::vector<std::pair<int64_t, int64_t>>{
             {2048, 128}, {7, 33}, {100, 200}, {4104, 9}, {16384, 5}, {4096, 70}, {1, 1}, {64, 1}})
      check_dense(act, act, K, N, {1, 2, 3, 4, 5});
}

// The GEMV's rule (host-only: runs without a GPU).
TEST(DenseGemvRule, RowsAndOverride) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  struct Reset {
    ~Reset() { cuda::set_dense_gemv(-1); }
  } reset;
  cuda::set_dense_gemv(1);
  for (int64_t M = 1; M <= cuda::kDenseGemvMaxRows; ++M) EXPECT_TRUE(cuda::dense_gemv_wanted(M, 128)) << M;
  EXPECT_FALSE(cuda::dense_gemv_wanted(cuda::kDenseGemvMaxRows + 1, 128));
  EXPECT_FALSE(cuda::dense_gemv_wanted(0, 128));
  cuda::set_dense_gemv(0);
  EXPECT_FALSE(cuda::dense_gemv_wanted(1, 128));
  cuda::set_dense_gemv(-1);
  if (std::getenv("QLM_DENSE_GEMV") == nullptr) {
    EXPECT_EQ(cuda::dense_gemv_wanted(1, 128), cuda::kDenseGemvByDefault);
    EXPECT_FALSE(cuda::dense_gemv_wanted(1, cuda::kDenseGemvDefaultMaxN + 1));
  }
}
#endif  // QLM_WITH_CUDA

TEST(DenseCudaRegistry, ListedForCudaWithReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";
  const auto* e = DenseKernelRegistry::instance().find("cuda_cublas_dense");
  ASSERT_TRUE(e != nullptr);
  EXPECT_EQ(e->device, DeviceType::CUDA);
  DenseLinearConfig c{.K_p = 64, .N_p = 64, .weight_dtype = DType::BF16, .act_dtype = DType::BF16,
                      .device = Device::cuda(0), .capability = 90};
  EXPECT_FALSE(e->can_implement(c).has_value());
  c.capability = 75;
  auto r = e->can_implement(c);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("capability"), std::string::npos) << *r;
  c.capability = 90;
  c.weight_dtype = DType::F8_E4M3;
  EXPECT_TRUE(e->can_implement(c).has_value());
  c.weight_dtype = DType::F32;
  c.device = Device::cpu();
  EXPECT_TRUE(e->can_implement(c).has_value());
}

}  // namespace
}  // namespace qlm
