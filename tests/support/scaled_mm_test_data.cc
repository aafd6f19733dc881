#include "support/scaled_mm_test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/float_convert.h"
#include "cuda/device.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "support/cuda_test_util.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "kernels/cuda/fp8_cutlass_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"
#endif

namespace qlm::testing {

const std::vector<W8A8Variant>& w8a8_variants() {
  static const std::vector<W8A8Variant> v = {
      {WeightScaleKind::Tensor, ActScheme::DynamicToken},  {WeightScaleKind::Channel, ActScheme::DynamicToken},
      {WeightScaleKind::Tensor, ActScheme::StaticTensor},  {WeightScaleKind::Channel, ActScheme::StaticTensor},
      {WeightScaleKind::Tensor, ActScheme::DynamicTensor}, {WeightScaleKind::Channel, ActScheme::DynamicTensor},
  };
  return v;
}

std::string w8a8_variant_name(const W8A8Variant& v) {
  return fmt::format("{}_{}", weight_scale_kind_name(v.ws), act_scheme_name(v.act));
}

ScaledMMConfig w8a8_variant_config(W8Type type, const W8A8Variant& v, int64_t N, int64_t K, DType act, Device device,
                                   int capability) {
  ScaledMMConfig c;
  c.K_p = K;
  c.N_p = N;
  c.weight_type = type;
  c.weight_scale = v.ws;
  c.act = v.act;
  c.act_symmetric = true;
  c.act_dtype = act;
  c.device = device;
  c.capability = capability;
  return c;
}

void trace_test_run(const std::string& what) {
  static const bool on = std::getenv("QLM_TEST_TRACE") != nullptr;
  if (!on) return;
  std::fprintf(stderr, "run %s\n", what.c_str());
  std::fflush(stderr);
}

double w8a8_tolerance(DType act) { return act == DType::BF16 ? 2e-3 : 1e-3; }

ScaledMMWeights random_scaled_mm_weights(const ScaledMMWeightSpec& s, int64_t N, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  ScaledMMWeights w;
  w.K = K;
  w.N = N;
  w.codes = Tensor::empty({N, K}, s.type == W8Type::Int8 ? DType::I8 : DType::F8_E4M3);
  for (int64_t i = 0; i < N * K; ++i)
    w.codes.data<uint8_t>()[i] =
        s.type == W8Type::Int8 ? static_cast<uint8_t>(rng() & 0xff) : f32_to_e4m3(u(rng) * 300.f);
  std::vector<float> scales;
  if (s.ws == WeightScaleKind::Tensor) scales = {0.0123f};
  if (s.ws == WeightScaleKind::Channel) scales.resize(static_cast<size_t>(N));
  const int64_t cols = (K + s.phase + s.block - 1) / s.block;
  if (s.ws == WeightScaleKind::Block) scales.resize(static_cast<size_t>(N * cols));
  if (s.ws != WeightScaleKind::Tensor)
    for (auto& x : scales) x = 0.001f + 0.01f * std::fabs(u(rng));
  w.weight_scale = s.ws == WeightScaleKind::Block ? Tensor::from_vector(scales, {N, cols})
                                                  : Tensor::from_vector(scales, {static_cast<int64_t>(scales.size())});
  if (s.ws == WeightScaleKind::Block) {
    w.block_k = s.block;
    w.k_phase = s.phase;
  }
  w.input_scale = 0.03125f;
  w.input_zero_point = s.sym ? 0 : 7;
  return w;
}

ScaledMMWeights clone_weights(const ScaledMMWeights& w) {
  ScaledMMWeights c = w;
  c.codes = w.codes.clone();
  c.weight_scale = w.weight_scale.clone();
  return c;
}

std::vector<float> scaled_mm_test_acts(int64_t M, int64_t K, DType act, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = u(rng);
  if (M > 2)
    for (int64_t k = 0; k < K; ++k) {
      x[static_cast<size_t>(K + k)] = 0.0f;
      x[static_cast<size_t>(2 * K + k)] *= 1e-6f;
    }
  return Tensor::from_vector(x, {M, K}).to(act).to_float_vector();
}

std::unique_ptr<ScaledMMKernel> make_scaled_mm_kernel(const char* kernel, const ScaledMMConfig& c,
                                                      const ScaledMMWeights& w,
                                                      const std::vector<std::pair<std::string, std::string>>& env) {
  const auto* entry = ScaledMMKernelRegistry::instance().find(kernel);
  EXPECT_TRUE(entry != nullptr) << kernel;
  if (entry == nullptr) return nullptr;
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  auto k = entry->create(c);
  k->prepare(clone_weights(w));
  for (const auto& [name, value] : env) unsetenv(name.c_str());
  return k;
}

ScaledMMConfig token_quant_config(bool int8, int64_t K, DType act, Device device) {
  ScaledMMConfig c;
  c.K_p = K;
  c.N_p = 16;
  c.weight_type = int8 ? W8Type::Int8 : W8Type::Fp8E4M3;
  c.weight_scale = WeightScaleKind::Tensor;
  c.act = ActScheme::DynamicToken;
  c.act_symmetric = true;
  c.act_dtype = act;
  c.device = device;
  if (!device.is_cpu()) c.capability = cuda_capability(device.index);
  return c;
}

TokenCodes cpu_token_codes(const std::vector<float>& x, int64_t M, int64_t K, DType act, bool int8) {
  const ScaledMMConfig c = token_quant_config(int8, K, act, Device::cpu());
  ScaledMMWeights w;
  w.K = K;
  TokenCodes out;
  if (int8) {
    std::vector<int8_t> codes(static_cast<size_t>(M * K));
    out.scales = quantize_acts_int8(c, w, x.data(), M, codes.data(), K, nullptr).scale;
    out.codes.assign(codes.begin(), codes.end());  // int8 -> its byte
  } else {
    std::vector<float> values(static_cast<size_t>(M * K));
    out.scales = quantize_acts_fp8(c, w, x.data(), M, values.data(), K, nullptr).scale;
    for (float v : values) out.codes.push_back(f32_to_e4m3(v));  // the values are e4m3-exact
  }
  return out;
}

#ifdef QLM_WITH_CUDA
TokenCodes gpu_token_codes(const std::vector<float>& x, int64_t M, int64_t K, DType act, bool int8, bool pdl) {
  const Tensor xt = Tensor::from_vector(x, {M, K}).to(act).to_device(Device::cuda(0));
  Tensor codes = Tensor::empty({M, K}, int8 ? DType::I8 : DType::F8_E4M3, Device::cpu());
  std::fill_n(codes.data<uint8_t>(), M * K, uint8_t{0x5a});
  codes = codes.to_device(Device::cuda(0));
  Tensor scales =
      Tensor::from_vector(std::vector<float>(static_cast<size_t>(M), std::numeric_limits<float>::quiet_NaN()), {M})
          .to_device(Device::cuda(0));
  EXPECT_EQ(cuda::launch_w8a8_quant_token(xt.raw_data(), cuda_float_type(act), M, K, int8, codes.raw_data(),
                                          scales.data<float>(), pdl, cuda::context(0).stream),
            cudaSuccess)
      << dtype_name(act) << " M=" << M << " K=" << K;
  const Tensor host_codes = codes.to_device(Device::cpu());
  return {std::vector<uint8_t>(host_codes.data<uint8_t>(), host_codes.data<uint8_t>() + M * K),
          scales.to_device(Device::cpu()).to_float_vector()};
}

std::vector<std::string> w8a8_cutlass_paths(const ScaledMMConfig& c) {
  std::vector<std::string> paths = {"off"};
  if (cuda::fp8_cutlass_available() && c.capability == 90 && c.act_dtype != DType::F32)
    for (int i = 0; i < static_cast<int>(cuda::Fp8CutlassConfig::kCount); ++i)
      paths.push_back(cuda::fp8_cutlass_config_name(static_cast<cuda::Fp8CutlassConfig>(i)));
  return paths;
}

void check_w8a8_streaming_kernel(const char* kernel, const std::string& env_prefix, W8Type type, const W8A8Variant& v,
                                 int64_t N, int64_t K, const std::vector<DType>& dtypes, const std::vector<int64_t>& Ms,
                                 uint64_t weight_seed, uint64_t act_seed_mul) {
  for (DType act : dtypes) {
    const ScaledMMConfig c = w8a8_variant_config(type, v, N, K, act, Device::cuda(0), cuda_capability(0));
    ASSERT_FALSE(ScaledMMKernelRegistry::instance().find(kernel)->can_implement(c).has_value()) << c.describe();
    const ScaledMMWeights w = random_scaled_mm_weights({.type = type, .ws = v.ws}, N, K, weight_seed + N + K);
    std::vector<float> bias(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) bias[static_cast<size_t>(n)] = 0.05f * static_cast<float>(n % 7) - 0.1f;
    std::vector<std::pair<std::string, std::unique_ptr<ScaledMMKernel>>> kernels;
    // The streaming kernel at every M, the default rule, and each large-M path forced.
    kernels.emplace_back("streaming", make_scaled_mm_kernel(kernel, c, w, {{env_prefix + "_FAST_MAX_M", "100000"}}));
    kernels.emplace_back("rule", make_scaled_mm_kernel(kernel, c, w));
    for (const std::string& p : w8a8_cutlass_paths(c))
      kernels.emplace_back(p, make_scaled_mm_kernel(kernel, c, w, {{env_prefix + "_CUTLASS_CONFIG", p}}));
    for (int64_t M : Ms) {
      const std::vector<float> x = scaled_mm_test_acts(M, K, act, act_seed_mul * static_cast<uint64_t>(M) + K);
      const bool with_bias = M % 2 == 1;
      const std::vector<float> want = scaled_mm_cpu_ref(c, w, x, M, with_bias ? &bias : nullptr);
      for (const auto& [name, k] : kernels) {
        if (name != "streaming" && M <= 16) continue;  // the streaming kernel's path either way
        const std::string what =
            fmt::format("{} M={} bias={} {} (path {})", c.describe(), M, with_bias, name, k->path(M));
        trace_test_run(what);
        const std::vector<float> got = run_scaled_mm_kernel(*k, c, x, M, with_bias ? &bias : nullptr);
        ASSERT_EQ(first_non_finite(got.data(), static_cast<int64_t>(got.size())), -1) << what;
        EXPECT_LE(mean_relative_error(got, want), w8a8_tolerance(act)) << what;
      }
    }
  }
}
#endif

std::vector<float> scaled_mm_cpu_ref(ScaledMMConfig c, const ScaledMMWeights& w, const std::vector<float>& x, int64_t M,
                                     const std::vector<float>* bias) {
  c.device = Device::cpu();
  c.act_dtype = DType::F32;
  const auto* e = ScaledMMKernelRegistry::instance().find("cpu_ref");
  EXPECT_TRUE(e != nullptr);
  auto k = e->create(c);
  k->prepare(clone_weights(w));
  Tensor xt = Tensor::from_vector(x, {M, c.K_p});
  Tensor y = Tensor::empty({M, c.N_p}, DType::F32);
  Tensor b = bias ? Tensor::from_vector(*bias, {c.N_p}) : Tensor();
  k->run(xt, y, bias ? &b : nullptr);
  return y.to_float_vector();
}

std::vector<float> run_scaled_mm_kernel(const ScaledMMKernel& k, const ScaledMMConfig& c, const std::vector<float>& x,
                                        int64_t M, const std::vector<float>* bias) {
  Tensor xt = Tensor::from_vector(x, {M, c.K_p}).to(c.act_dtype).to_device(c.device);
  Tensor y = nan_poisoned(M, c.N_p, c.act_dtype, c.device);
  Tensor b = bias ? Tensor::from_vector(*bias, {c.N_p}).to_device(c.device) : Tensor();
  k.run(xt, y, bias ? &b : nullptr);
  return y.to_device(Device::cpu()).to_float_vector();
}

void check_quantizing_in_the_gemm(W8Type type, const char* kernel, const std::string& env_prefix) {
  const auto* entry = ScaledMMKernelRegistry::instance().find(kernel);
  ASSERT_TRUE(entry != nullptr) << kernel;
  const std::string fused_max = env_prefix + "_FUSED_QUANT_MAX_M", splits_env = env_prefix + "_FAST_SPLITS";
  struct Shape {
    int64_t N, K;
  };
  for (const Shape sh : {Shape{144, 512}, Shape{272, 1280}, Shape{4096, 14336}})
    for (const WeightScaleKind ws : {WeightScaleKind::Tensor, WeightScaleKind::Channel})
      for (const DType act : {DType::BF16, DType::F16, DType::F32}) {
        if (sh.K > 2048 && act != DType::BF16) continue;
        ScaledMMConfig c;
        c.K_p = sh.K;
        c.N_p = sh.N;
        c.weight_type = type;
        c.weight_scale = ws;
        c.act = ActScheme::DynamicToken;
        c.act_dtype = act;
        c.device = Device::cuda(0);
        c.capability = cuda_capability(0);
        ASSERT_FALSE(entry->can_implement(c).has_value()) << c.describe();
        const ScaledMMWeights w = random_scaled_mm_weights({.type = type, .ws = ws}, sh.N, sh.K, 11 + sh.N);
        std::vector<float> bias(static_cast<size_t>(sh.N));
        for (int64_t n = 0; n < sh.N; ++n) bias[static_cast<size_t>(n)] = 0.03f * static_cast<float>(n % 5) - 0.05f;
        for (const char* splits : {"", "1", "3"}) {
          std::vector<std::pair<std::string, std::string>> split;
          if (*splits) split.emplace_back(splits_env, splits);
          // The split's setting plus the in-GEMM quantization's bound.
          const auto with = [&](const char* max_m) {
            std::vector<std::pair<std::string, std::string>> env = split;
            env.emplace_back(fused_max, max_m);
            return env;
          };
          const auto by_default = make_scaled_mm_kernel(kernel, c, w, split);  // in the GEMM at one token
          // Up to 4 tokens in the GEMM; and the quantizer, GEMM and reduction kernels.
          const auto fused = make_scaled_mm_kernel(kernel, c, w, with("4"));
          const auto separate = make_scaled_mm_kernel(kernel, c, w, with("0"));
          for (int64_t M = 1; M <= 5; ++M) {
            EXPECT_EQ(by_default->path(M), M <= 1 ? "streaming, quantizing in the GEMM" : "streaming");
            EXPECT_EQ(fused->path(M), M <= 4 ? "streaming, quantizing in the GEMM" : "streaming");
            EXPECT_EQ(separate->path(M), "streaming");
            std::vector<float> x = scaled_mm_test_acts(M, sh.K, act, 31 * M + sh.K);
            if (M == 2)
              for (int64_t k = 0; k < sh.K; ++k) x[static_cast<size_t>(sh.K + k)] = 0.0f;  // token 1 all zero
            if (M == 3) x[static_cast<size_t>(2 * sh.K + 7)] = 200.0f;                     // small codes beside it
            const bool with_bias = M % 2 == 1;
            const std::string what =
                fmt::format("{} M={} splits={} bias={}", c.describe(), M, *splits ? splits : "rule", with_bias);
            const std::vector<float> want = run_scaled_mm_kernel(*separate, c, x, M, with_bias ? &bias : nullptr);
            ASSERT_EQ(first_non_finite(want.data(), static_cast<int64_t>(want.size())), -1) << what;
            for (const ScaledMMKernel* k : {fused.get(), by_default.get()}) {
              const std::vector<float> got = run_scaled_mm_kernel(*k, c, x, M, with_bias ? &bias : nullptr);
              for (size_t i = 0; i < got.size(); ++i)
                ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << what << " " << k->path(M) << " element " << i;
            }
          }
        }
      }
}

}  // namespace qlm::testing
