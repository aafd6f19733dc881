// AddRmsNormTail (kernels/linear_tail.h): a linear kernel that runs the residual add and RMSNorm in its own launch
// gives bit for bit what the layer followed by ops::cu::add_rms_norm gives (the layer output, the updated residual,
// the normed rows); where it cannot, it runs nothing and writes nothing. Skipped without a GPU; the kernels that
// offer a tail need sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/device.h"
#include "cuda/graph.h"
#include "kernels/cuda/wna16_fast_paths.h"
#include "kernels/mp_linear.h"
#include "kernels/scaled_mm.h"
#include "runtime/ops/cuda/device_ops.h"
#include "support/scaled_mm_test_data.h"
#include "support/scoped_env.h"
#include "tests/kernels/wna16_random.h"
#include "tests/support/cuda_test_util.h"

// The device ops exist only in CUDA builds.
#ifdef QLM_WITH_CUDA
namespace qlm {
namespace {

using testing::Wna16Spec;

const Device kGpu = Device::cuda(0);

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

Tensor upload(const std::vector<float>& v, Shape shape, DType dtype = DType::F32) {
  return Tensor::from_vector(v, std::move(shape)).to(dtype).to_device(kGpu);
}

// The raw bytes of a device tensor (bitwise comparisons, NaN payloads included).
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor host = t.to_device(Device::cpu());
  std::vector<uint8_t> b(host.nbytes());
  std::memcpy(b.data(), host.raw_data(), b.size());
  return b;
}

class CudaLinearTailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto devices = cuda_devices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    capability_ = devices[0].capability;
  }
  void TearDown() override { set_wna16_fast_path(Wna16FastPath::Auto); }

  std::unique_ptr<MPLinearKernel> wna16_kernel(const Wna16Spec& s, DType act) const {
    auto kernel =
        MPKernelRegistry::instance().find("cuda_wna16_fast")->create(testing::wna16_config(s, act, kGpu, capability_));
    kernel->prepare(testing::random_wna16(s).weights);
    return kernel;
  }

  int capability_ = 0;
};

// The tail on M contiguous rows of width N: residual and normed [M, N] (F32 / the act dtype), weight [N].
AddRmsNormTail tail_of(Tensor& residual, const Tensor& weight, Tensor& normed, int64_t N, float eps) {
  return AddRmsNormTail{.residual = residual.data<float>(),
                        .residual_stride = N,
                        .weight = weight.data<float>(),
                        .out = normed.raw_data(),
                        .out_stride = N,
                        .eps = eps};
}

// The shape of a layer for the tail tests.
struct LayerShape {
  int64_t K = 0, N = 0;
};

// One call of `kernel` (an MPLinearKernel or a ScaledMMKernel) on M rows both ways, from the same inputs: run() +
// add_rms_norm against run_with_tail(). Past kAddRmsNormTailMaxRows rows the kernel must refuse, having run nothing
// (outputs still poisoned, the residual as it was).
template <typename Kernel>
void expect_tail_equals_separate(const Kernel& kernel, LayerShape s, DType act, int64_t M, bool with_bias,
                                 uint32_t seed) {
  SCOPED_TRACE(fmt::format("K={} N={} act={} M={}{}", s.K, s.N, dtype_name(act), M, with_bias ? " bias" : ""));
  const Tensor x = upload(random_floats(M * s.K, seed, 1.0f), {M, s.K}, act);
  const std::vector<float> residual = random_floats(M * s.N, seed + 1, 4.0f);
  const Tensor weight = upload(random_floats(s.N, seed + 2, 1.5f), {s.N});
  const Tensor bias = upload(random_floats(s.N, seed + 3, 0.5f), {s.N});
  const Tensor* b = with_bias ? &bias : nullptr;
  const float eps = 1e-5f;

  Tensor y_separate = testing::nan_poisoned(M, s.N, act, kGpu);
  kernel.run(x, y_separate, b);
  Tensor residual_separate = upload(residual, {M, s.N});
  const Tensor normed_separate = ops::cu::add_rms_norm(residual_separate, y_separate, 0, M, weight, eps, act);

  Tensor y_tail = testing::nan_poisoned(M, s.N, act, kGpu);
  Tensor residual_tail = upload(residual, {M, s.N});
  Tensor normed_tail = testing::nan_poisoned(M, s.N, act, kGpu);
  const AddRmsNormTail tail = tail_of(residual_tail, weight, normed_tail, s.N, eps);
  if (M > kAddRmsNormTailMaxRows) {
    const std::vector<uint8_t> poison = bytes_of(testing::nan_poisoned(M, s.N, act, kGpu));
    EXPECT_FALSE(kernel.run_with_tail(x, y_tail, b, tail)) << "path " << kernel.path(M);
    EXPECT_EQ(bytes_of(y_tail), poison);
    EXPECT_EQ(bytes_of(normed_tail), poison);
    EXPECT_EQ(bytes_of(residual_tail), bytes_of(upload(residual, {M, s.N})));
    return;
  }
  ASSERT_TRUE(kernel.run_with_tail(x, y_tail, b, tail)) << "path " << kernel.path(M);
  EXPECT_EQ(bytes_of(y_tail), bytes_of(y_separate)) << "layer output";
  EXPECT_EQ(bytes_of(residual_tail), bytes_of(residual_separate)) << "residual";
  EXPECT_EQ(bytes_of(normed_tail), bytes_of(normed_separate)) << "normed rows";
}

// The W4A16 stream kernel's tail over norm widths that give the standalone kernel's every form: 4096 (one float4 a
// thread: its ONE form), 8192 and 14336 (1024 threads, several float4s each), 1000 and 264 (fewer threads than
// a block of the GEMM, the last warp partly empty), 4-bit and 8-bit, zero points, act-order, g32 / g128 /
// channelwise; BF16 and F16; with and without a bias; one token (the decode step), and 3 to 32 tokens (one, two and
// four m-tiles), which the kernel refuses.
TEST_F(CudaLinearTailTest, Wna16StreamTailIsAddRmsNormBitForBit) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  set_wna16_fast_path(Wna16FastPath::Stream);
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 4096, .N = 4096, .group_size = 128, .seed = 301},
      {.bits = 4, .K = 2048, .N = 8192, .group_size = 32, .zero_points = true, .act_order = true, .seed = 302},
      {.bits = 8, .K = 1024, .N = 14336, .group_size = 128, .seed = 303},
      {.bits = 4, .K = 3072, .N = 1000, .group_size = -1, .seed = 304},
      {.bits = 4, .K = 1024, .N = 264, .group_size = 64, .zero_points = true, .seed = 305},
  };
  uint32_t seed = 1;
  for (const auto& s : specs)
    for (const DType act : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(testing::wna16_spec_str(s));
      const auto kernel = wna16_kernel(s, act);
      for (const int64_t M : {1, 3, 8, 9, 16, 17, 32}) {
        expect_tail_equals_separate(*kernel, {s.K, s.N}, act, M, M % 2 == 1, seed);
        seed += 4;
      }
    }
}

// The last block leaves its counter zero: calls back to back, and the same call replayed from a CUDA graph, each
// give the separate ops' bits (a counter left non-zero would give the tail to no block, or to one too early).
TEST_F(CudaLinearTailTest, Wna16StreamTailRepeatsAndReplays) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  set_wna16_fast_path(Wna16FastPath::Stream);
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 4096, .group_size = 128, .seed = 311};
  const auto kernel = wna16_kernel(s, DType::BF16);
  for (int call = 0; call < 3; ++call)
    expect_tail_equals_separate(*kernel, {s.K, s.N}, DType::BF16, 1, false, 50 + call);

  const int64_t M = 1;
  const Tensor x = upload(random_floats(M * s.K, 7, 1.0f), {M, s.K}, DType::BF16);
  const std::vector<float> residual0 = random_floats(M * s.N, 8, 4.0f);
  const Tensor weight = upload(random_floats(s.N, 9, 1.5f), {s.N});
  Tensor residual = upload(residual0, {M, s.N});
  Tensor y = Tensor::empty({M, s.N}, DType::BF16, kGpu);
  Tensor normed = Tensor::empty({M, s.N}, DType::BF16, kGpu);
  const AddRmsNormTail tail = tail_of(residual, weight, normed, s.N, 1e-6f);
  std::string why;
  bool ran = false;
  const auto graph = cuda::CapturedGraph::capture(
      0, [&] { ran = kernel->run_with_tail(x, y, nullptr, tail); }, &why);
  ASSERT_TRUE(graph) << why;
  ASSERT_TRUE(ran);
  // Each replay adds y once more to the residual: after n replays the separate ops applied n times.
  Tensor want_residual = upload(residual0, {M, s.N});
  Tensor want_y = Tensor::empty({M, s.N}, DType::BF16, kGpu);
  kernel->run(x, want_y, nullptr);
  for (int replay = 1; replay <= 3; ++replay) {
    graph->launch();
    const Tensor want_normed = ops::cu::add_rms_norm(want_residual, want_y, 0, M, weight, 1e-6f, DType::BF16);
    EXPECT_EQ(bytes_of(residual), bytes_of(want_residual)) << "replay " << replay;
    EXPECT_EQ(bytes_of(normed), bytes_of(want_normed)) << "replay " << replay;
  }
}

// The W8A8 streaming GEMM (FP8 and INT8, per-channel weights, dynamic per-token activations) with its K split
// (QLM_<FP8|INT8>_FAST_SPLITS=4: the split reduction's last block runs the tail): one token (the GEMM quantizing x
// itself; 2, 4 and 16 tokens are refused), BF16 and F16, norm widths 4096, 1008 and 272. Without a split
// (QLM_..._FAST_SPLITS=1) there is no reduction to run it: nothing runs.
TEST_F(CudaLinearTailTest, W8A8StreamTailIsAddRmsNormBitForBit) {
  const LayerShape shapes[] = {{4096, 4096}, {14336, 1008}, {2048, 272}};  // N: multiples of 16 (the GEMM's)
  for (const auto& [name, type, prefix] : {std::tuple{"cuda_scaled_mm_fp8_fast", W8Type::Fp8E4M3, "QLM_FP8"},
                                           std::tuple{"cuda_scaled_mm_int8_fast", W8Type::Int8, "QLM_INT8"}})
    for (const LayerShape s : shapes)
      for (const DType act : {DType::BF16, DType::F16}) {
        ScaledMMConfig c;
        c.K_p = s.K;
        c.N_p = s.N;
        c.weight_type = type;
        c.weight_scale = WeightScaleKind::Channel;
        c.act = ActScheme::DynamicToken;
        c.act_symmetric = true;
        c.act_dtype = act;
        c.device = kGpu;
        c.capability = capability_;
        const ScaledMMWeights w = testing::random_scaled_mm_weights({.type = type, .ws = c.weight_scale}, s.N, s.K, 7);
        const auto make = [&](const char* splits) {
          testing::ScopedEnv env((std::string(prefix) + "_FAST_SPLITS").c_str(), splits);
          auto kernel = ScaledMMKernelRegistry::instance().find(name)->create(c);
          kernel->prepare(w);
          return kernel;
        };
        SCOPED_TRACE(name);
        const auto split = make("4");
        for (const int64_t M : {1, 2, 4, 16}) expect_tail_equals_separate(*split, s, act, M, M != 2, 100 + M);

        const auto whole = make("1");
        const int64_t M = 1;  // a row the tail would take with a split
        Tensor residual = upload(random_floats(M * s.N, 5, 1.0f), {M, s.N});
        const Tensor weight = upload(random_floats(s.N, 6, 1.0f), {s.N});
        Tensor y = testing::nan_poisoned(M, s.N, act, kGpu), normed = testing::nan_poisoned(M, s.N, act, kGpu);
        const std::vector<uint8_t> poison = bytes_of(y), residual0 = bytes_of(residual);
        const AddRmsNormTail tail = tail_of(residual, weight, normed, s.N, 1e-6f);
        EXPECT_FALSE(whole->run_with_tail(upload(random_floats(M * s.K, 4, 1.0f), {M, s.K}, act), y, nullptr, tail));
        EXPECT_EQ(bytes_of(y), poison);
        EXPECT_EQ(bytes_of(normed), poison);
        EXPECT_EQ(bytes_of(residual), residual0);
      }
}

// Where the kernel cannot run the tail it runs nothing: another path of cuda_wna16_fast, a norm width that is not a
// multiple of 4, a misaligned residual. Outputs stay poisoned, the residual as it was.
TEST_F(CudaLinearTailTest, NoTailWhereTheKernelCannot) {
  const struct {
    std::string what;
    Wna16Spec spec;
    Wna16FastPath path;
    int64_t residual_offset;  // floats: 1 misaligns the residual's rows
  } cases[] = {
      {"gemv path", {.bits = 4, .K = 1024, .N = 512, .group_size = 128, .seed = 321}, Wna16FastPath::Gemv, 0},
      {"tiled path", {.bits = 4, .K = 1024, .N = 512, .group_size = 128, .seed = 322}, Wna16FastPath::Tiled, 0},
      {"width 333", {.bits = 8, .K = 512, .N = 333, .group_size = 64, .seed = 323}, Wna16FastPath::Stream, 0},
      {"misaligned residual",
       {.bits = 4, .K = 1024, .N = 512, .group_size = 128, .seed = 324},
       Wna16FastPath::Stream,
       1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    set_wna16_fast_path(c.path);
    const auto kernel = wna16_kernel(c.spec, DType::BF16);
    const int64_t M = 1, N = c.spec.N;  // a row the tail would take
    const Tensor x = upload(random_floats(M * c.spec.K, 11, 1.0f), {M, c.spec.K}, DType::BF16);
    const std::vector<float> residual0 = random_floats(M * N + 1, 12, 4.0f);
    Tensor residual = upload(residual0, {M * N + 1});
    const Tensor weight = upload(random_floats(N, 13, 1.0f), {N});
    Tensor y = testing::nan_poisoned(M, N, DType::BF16, kGpu);
    Tensor normed = testing::nan_poisoned(M, N, DType::BF16, kGpu);
    const std::vector<uint8_t> poison = bytes_of(y);
    const AddRmsNormTail tail{.residual = residual.data<float>() + c.residual_offset,
                              .residual_stride = N,
                              .weight = weight.data<float>(),
                              .out = normed.raw_data(),
                              .out_stride = N,
                              .eps = 1e-6f};
    EXPECT_FALSE(kernel->run_with_tail(x, y, nullptr, tail)) << kernel->path(M);
    EXPECT_EQ(bytes_of(y), poison);
    EXPECT_EQ(bytes_of(normed), poison);
    EXPECT_EQ(bytes_of(residual), bytes_of(upload(residual0, {M * N + 1})));
  }
}

}  // namespace
}  // namespace qlm
#endif  // QLM_WITH_CUDA
