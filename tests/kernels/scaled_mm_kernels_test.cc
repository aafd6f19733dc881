// Scaled-mm kernels: every registered CPU kernel against an independent float64 / int64
// computation, over INT8 and FP8 weights, every weight-scale and activation scheme, and shapes that
// are not multiples of any tile (K % 4 != 0, N % 16 != 0, M = 1 .. 33).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/float_convert.h"
#include "core/thread_pool.h"
#include "kernels/cpu/scaled_mm_act_quant.h"
#include "kernels/scaled_mm.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

struct Problem {
  ScaledMMConfig c;
  ScaledMMWeights w;
  std::vector<float> x;
  int64_t M = 0;
};

Problem make_problem(W8Type type, WeightScaleKind ws, ActScheme act, bool sym, int64_t M, int64_t N, int64_t K,
                     uint64_t seed, int64_t block = 32, int64_t phase = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Problem p;
  p.M = M;
  p.c.K_p = K;
  p.c.N_p = N;
  p.c.weight_type = type;
  p.c.weight_scale = ws;
  p.c.block_n = block;
  p.c.block_k = block;
  p.c.act = act;
  p.c.act_group = act == ActScheme::DynamicTokenGroup ? block : 0;
  p.c.act_symmetric = sym;
  p.w.K = K;
  p.w.N = N;
  p.w.codes = Tensor::empty({N, K}, type == W8Type::Int8 ? DType::I8 : DType::F8_E4M3);
  for (int64_t i = 0; i < N * K; ++i) {
    if (type == W8Type::Int8)
      p.w.codes.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    else
      p.w.codes.data<uint8_t>()[i] = f32_to_e4m3(u(rng) * 300.f);
  }
  switch (ws) {
    case WeightScaleKind::Tensor: p.w.weight_scale = Tensor::from_vector(std::vector<float>{0.0123f}, {1}); break;
    case WeightScaleKind::Channel: {
      std::vector<float> s(static_cast<size_t>(N));
      for (auto& v : s) v = 0.001f + 0.01f * std::fabs(u(rng));
      p.w.weight_scale = Tensor::from_vector(s, {N});
      break;
    }
    case WeightScaleKind::Block: {
      const int64_t cols = (K + phase + block - 1) / block;
      std::vector<float> s(static_cast<size_t>(N * cols));
      for (auto& v : s) v = 0.001f + 0.01f * std::fabs(u(rng));
      p.w.weight_scale = Tensor::from_vector(s, {N, cols});
      p.w.block_k = block;
      p.w.k_phase = phase;
      break;
    }
  }
  p.w.input_scale = 0.03125f;  // 2^-5
  p.w.input_zero_point = sym ? 0 : 7;
  p.x.resize(static_cast<size_t>(M * K));
  for (auto& v : p.x) v = u(rng) * 3.f;
  return p;
}

double wscale(const Problem& p, int64_t n, int64_t k) {
  const float* s = p.w.weight_scale.data<float>();
  switch (p.c.weight_scale) {
    case WeightScaleKind::Tensor: return s[0];
    case WeightScaleKind::Channel: return s[n];
    case WeightScaleKind::Block: return s[n * p.w.weight_scale.size(1) + (k + p.w.k_phase) / p.w.block_k];
  }
  return 0;
}

double wcode(const Problem& p, int64_t n, int64_t k) {
  return p.c.weight_type == W8Type::Int8 ? p.w.codes.data<int8_t>()[n * p.c.K_p + k]
                                         : e4m3_to_f32(p.w.codes.data<uint8_t>()[n * p.c.K_p + k]);
}

// Float64 reference on the activation codes of the shared quantizers (the "exact-scale reference").
std::vector<double> reference(const Problem& p, const std::vector<float>* bias) {
  const int64_t M = p.M, N = p.c.N_p, K = p.c.K_p;
  std::vector<double> xd(static_cast<size_t>(M * K));
  if (p.c.act == ActScheme::None) {
    for (size_t i = 0; i < xd.size(); ++i) xd[i] = p.x[i];
  } else if (p.c.weight_type == W8Type::Int8) {
    std::vector<int8_t> q(xd.size());
    ActScales s = quantize_acts_int8(p.c, p.w, p.x.data(), M, q.data(), K, nullptr);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) xd[m * K + k] = (double(q[m * K + k]) - s.zero[m]) * s.scale[m];
  } else {
    std::vector<float> q(xd.size());
    ActScales s = quantize_acts_fp8(p.c, p.w, p.x.data(), M, q.data(), K, nullptr);
    const int64_t g = p.c.act == ActScheme::DynamicTokenGroup ? p.c.act_group : K;
    const int64_t phase = p.c.act == ActScheme::DynamicTokenGroup ? p.w.k_phase : 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) xd[m * K + k] = double(q[m * K + k]) * s.scale[m * s.groups + (k + phase) / g];
  }
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += xd[m * K + k] * wcode(p, n, k) * wscale(p, n, k);
      y[m * N + n] = acc + (bias ? (*bias)[n] : 0.0);
    }
  return y;
}

std::vector<float> run_kernel(const ScaledMMKernelRegistry::Entry& e, const Problem& p,
                              const std::vector<float>* bias) {
  auto k = e.create(p.c);
  ScaledMMWeights w = p.w;
  w.codes = p.w.codes.clone();
  w.weight_scale = p.w.weight_scale.clone();
  k->prepare(std::move(w));
  Tensor x = Tensor::from_vector(p.x, {p.M, p.c.K_p});
  Tensor y = Tensor::empty({p.M, p.c.N_p}, DType::F32);
  Tensor b = bias ? Tensor::from_vector(*bias, {p.c.N_p}) : Tensor();
  k->run(x, y, bias ? &b : nullptr);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

double rel_mean_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::fabs(a[i] - b[i]);
    den += std::fabs(b[i]);
  }
  return num / std::max(den, 1e-30);
}

struct Case {
  W8Type type;
  WeightScaleKind ws;
  ActScheme act;
  bool sym;
};

class ScaledMMKernels : public ::testing::TestWithParam<Case> {};

TEST_P(ScaledMMKernels, EveryKernelMatchesFloat64Reference) {
  const Case& c = GetParam();
  int kernels_run = 0;
  for (int64_t M : {1, 7, 33})
    for (auto [N, K] : {std::pair<int64_t, int64_t>{16, 64}, {100, 100}, {130, 258}}) {
      Problem p = make_problem(c.type, c.ws, c.act, c.sym, M, N, K, 1000 + M * 7 + N);
      std::vector<float> bias(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) bias[n] = 0.01f * static_cast<float>(n % 7);
      const std::vector<double> ref = reference(p, &bias);
      for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
        if (e.device != DeviceType::CPU || e.can_implement(p.c)) continue;
        ++kernels_run;
        const std::vector<float> y = run_kernel(e, p, &bias);
        const double tol = c.type == W8Type::Int8 ? 1e-6 : 1e-5;
        EXPECT_LE(rel_mean_error(y, ref), tol) << e.name << " " << p.c.describe() << " M=" << M;
      }
    }
  EXPECT_GT(kernels_run, 0);
}

INSTANTIATE_TEST_SUITE_P(
    All, ScaledMMKernels,
    ::testing::Values(Case{W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, true},
                      Case{W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, false},
                      Case{W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, true},
                      Case{W8Type::Int8, WeightScaleKind::Channel, ActScheme::DynamicToken, false},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Tensor, ActScheme::StaticTensor, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Tensor, ActScheme::DynamicTensor, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::DynamicToken, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicToken, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::None, true},
                      Case{W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::None, true}),
    [](const auto& info) {
      const Case& c = info.param;
      return fmt::format("{}_{}_{}{}", w8_type_name(c.type), weight_scale_kind_name(c.ws), act_scheme_name(c.act),
                         c.sym ? "" : "_asym");
    });

// INT8 with power-of-two scales: every kernel's output is the int64 accumulation exactly (the
// accumulators stay below 2^24, so the f32 epilogue is exact).
TEST(ScaledMMInt8, IntegerAccumulationIsBitExact) {
  for (bool sym : {true, false})
    for (int64_t K : {4, 61, 256}) {
      Problem p = make_problem(W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, sym, 9, 70, K, 5 + K);
      p.w.weight_scale = Tensor::from_vector(std::vector<float>{0.0078125f}, {1});  // 2^-7
      std::vector<int8_t> q(static_cast<size_t>(p.M * K));
      ActScales s = quantize_acts_int8(p.c, p.w, p.x.data(), p.M, q.data(), K, nullptr);
      for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
        if (e.can_implement(p.c)) continue;
        const std::vector<float> y = run_kernel(e, p, nullptr);
        for (int64_t m = 0; m < p.M; ++m)
          for (int64_t n = 0; n < 70; ++n) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; ++k)
              acc += (int64_t{q[m * K + k]} - s.zero[m]) * int64_t{p.w.codes.data<int8_t>()[n * K + k]};
            const float want = static_cast<float>(acc) * 0.03125f * 0.0078125f;
            ASSERT_EQ(y[m * 70 + n], want) << e.name << " K=" << K << " m=" << m << " n=" << n;
          }
      }
    }
}

// Extreme codes: every activation -128 / +127 against weights -128: the u8 offset trick's
// compensation must stay exact at the int32 limits the kernel allows.
TEST(ScaledMMInt8, ExtremeCodesStayExact) {
  Problem p = make_problem(W8Type::Int8, WeightScaleKind::Tensor, ActScheme::StaticTensor, true, 3, 20, 2048, 9);
  for (int64_t i = 0; i < 20 * 2048; ++i) p.w.codes.data<int8_t>()[i] = -128;
  p.w.weight_scale = Tensor::from_vector(std::vector<float>{1.0f}, {1});
  p.w.input_scale = 1.0f;
  for (int64_t k = 0; k < 2048; ++k) {
    p.x[k] = -1000.f;        // clamps to -128
    p.x[2048 + k] = 1000.f;  // clamps to 127
    p.x[4096 + k] = (k % 2) ? 127.f : -128.f;
  }
  for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
    if (e.can_implement(p.c)) continue;
    const std::vector<float> y = run_kernel(e, p, nullptr);
    EXPECT_EQ(y[0], 2048.f * 128 * 128) << e.name;
    EXPECT_EQ(y[20], -2048.f * 127 * 128) << e.name;
    EXPECT_EQ(y[40], 1024.f * 128 * 128 - 1024.f * 127 * 128) << e.name;
  }
}

// A NaN code in the checkpoint (0x7F / 0xFF) reaches the output of its column on every CPU FP8 kernel, as the
// float values would make it (no conversion may turn it into a finite weight), and the other columns stay finite.
TEST(ScaledMMFp8, NanCodesReachTheirColumns) {
  for (uint8_t nan : {uint8_t{0x7F}, uint8_t{0xFF}}) {
    Problem p = make_problem(W8Type::Fp8E4M3, WeightScaleKind::Channel, ActScheme::None, true, 3, 20, 64, 13);
    p.w.codes.data<uint8_t>()[7 * 64 + 5] = nan;
    for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
      if (e.device != DeviceType::CPU || e.can_implement(p.c)) continue;
      const std::vector<float> y = run_kernel(e, p, nullptr);
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 20; ++n)
          EXPECT_EQ(std::isnan(y[static_cast<size_t>(m * 20 + n)]), n == 7) << e.name << " m=" << m << " n=" << n;
    }
  }
}

// Unaligned block shards: local column 0 at global k = phase inside a block.
TEST(ScaledMMFp8, BlockScalesWithPhase) {
  Problem p =
      make_problem(W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::DynamicTokenGroup, true, 5, 40, 100, 3, 32, 20);
  const std::vector<double> ref = reference(p, nullptr);
  for (const auto& e : ScaledMMKernelRegistry::instance().entries()) {
    if (e.can_implement(p.c)) continue;
    EXPECT_LE(rel_mean_error(run_kernel(e, p, nullptr), ref), 1e-5) << e.name;
  }
}

// Block scales of 2^k keep every folded weight exact in bf16 (FP4 weights with e8m0 scales, quant/fp4_method.h):
// cpu_fast_fp8 then streams 2 bytes a weight instead of 4, with the same results.
TEST(ScaledMMFp8, PowerOfTwoBlockScalesFoldIntoBf16) {
  const auto* e = ScaledMMKernelRegistry::instance().find("cpu_fast_fp8");
  ASSERT_NE(e, nullptr);
  for (bool pow2 : {true, false}) {
    Problem p = make_problem(W8Type::Fp8E4M3, WeightScaleKind::Block, ActScheme::None, true, 7, 45, 96, 21, 16);
    p.c.block_n = 1;
    if (pow2) {
      float* s = p.w.weight_scale.data<float>();
      for (int64_t i = 0; i < p.w.weight_scale.numel(); ++i) s[i] = std::ldexp(1.0f, -3 - static_cast<int>(i % 9));
    }
    if (auto why = e->can_implement(p.c)) GTEST_SKIP() << *why;
    auto k = e->create(p.c);
    ScaledMMWeights w = p.w;
    w.codes = p.w.codes.clone();
    w.weight_scale = p.w.weight_scale.clone();
    k->prepare(std::move(w));
    const size_t per_weight = k->weight_bytes() / static_cast<size_t>(p.c.K_p * 64);  // 45 columns pad to 2 tiles
    EXPECT_EQ(per_weight, pow2 ? 2u : 4u) << "pow2=" << pow2;
    EXPECT_LE(rel_mean_error(run_kernel(*e, p, nullptr), reference(p, nullptr)), 1e-6) << "pow2=" << pow2;
  }
}

TEST(ScaledMMSelection, ReasonsNameTheConstraint) {
  ScaledMMConfig c;
  c.K_p = 100000;
  c.N_p = 16;
  c.weight_type = W8Type::Int8;
  c.weight_scale = WeightScaleKind::Channel;
  c.act = ActScheme::DynamicToken;
  for (const auto& e : ScaledMMKernelRegistry::instance().entries())
    if (e.name.rfind("cpu_fast_int8", 0) == 0) {
      auto r = e.can_implement(c);
      ASSERT_TRUE(r.has_value());
      EXPECT_TRUE(r->find("K_p") != std::string::npos || r->find("lacks") != std::string::npos) << *r;
    }
  c.weight_scale = WeightScaleKind::Block;
  c.block_n = c.block_k = 128;
  EXPECT_QLM_ERROR(ScaledMMKernelRegistry::instance().select(c, DeviceType::CPU, "auto", "scaled-mm linear", "L"),
                   "kernel.none", "blocks");
}

}  // namespace
}  // namespace qlm
