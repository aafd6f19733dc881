// The integer kernel of cpu_fast_avx512_vnni (wna16_vnni.h): the activation limbs against digits the
// test derives itself, the limb layout against a scalar emulation of vpdpbusd on random code words,
// the AVX-512 split against the portable one byte for byte, the activations it declines, the int32
// bound, and accuracy with outliers and at the bound. The reference grid (every bit width, group,
// zero points, act-order, odd shapes) runs the kernel in wna16_kernels_test.cc.
#include "kernels/cpu/wna16_vnni.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/wna16_layout.h"
#include "kernels/mp_linear.h"
#include "tests/kernels/wna16_random.h"

namespace qlm {
namespace {

using testing::Wna16Spec;

// Shapes whose layouts cover every storage width, padded groups (act-order and group sizes that are
// not whole words), channelwise, and group rows that are not multiples of 16.
std::vector<Wna16Spec> layout_specs() {
  return {
      {.bits = 4, .K = 384, .N = 40, .group_size = 128, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 2},
      {.bits = 2, .K = 120, .N = 8, .group_size = 40, .act_order = true, .seed = 3},
      {.bits = 3, .K = 101, .N = 31, .group_size = -1, .zero_points = true, .seed = 4},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 5},
      {.bits = 8, .K = 260, .N = 5, .group_size = -1, .seed = 6},
  };
}

// Activations with every kind of magnitude a group can hold: uniform, exact zeros, an outlier
// 1e4 x the rest, tiny (but not subnormal-scaled) values, and exact ties at half a limb step.
std::vector<float> varied_activations(int64_t M, int64_t K, uint64_t seed) {
  std::vector<float> x = testing::random_floats(static_cast<size_t>(M * K), seed);
  std::mt19937_64 rng(seed + 5);
  for (int64_t m = 0; m < M; ++m) {
    float* row = x.data() + m * K;
    if (m % 4 == 1) row[rng() % K] = 1e4f;
    if (m % 4 == 2)
      for (int64_t k = 0; k < K; ++k) row[k] *= 1e-20f;
    if (m % 4 == 3)
      for (int64_t k = 0; k < K; k += 3) row[k] = 0.0f;
    row[0] = 63.5f / 127.0f * (row[1] >= 0 ? 1.0f : -1.0f);
  }
  return x;
}

// Packed row r's activation, read as the layout says (row_source, padding zero).
float packed_value(const PackedWna16& p, const float* x, int64_t m, int64_t r) {
  const int64_t k = p.row_source.empty() ? r : p.row_source[r];
  return k >= 0 ? x[m * p.K + k] : 0.0f;
}

int8_t limb_byte(const LimbActivations& a, const PackedWna16& p, int64_t m, int l, int64_t w, int u, int b) {
  const int U = 8 / p.storage_bits;
  const auto* bytes = reinterpret_cast<const int8_t*>(a.limbs.data());
  return bytes[((m * kVnniLimbs + l) * p.words * U + w * U + u) * 4 + b];
}

TEST(Wna16VnniLimbs, DigitsReconstructTheActivationsWithinTheBound) {
  for (const auto& spec : layout_specs()) {
    SCOPED_TRACE(fmt::format("bits={} K={} group={}", spec.bits, spec.K, spec.group_size));
    const PackedWna16 p = pack_wna16(testing::random_wna16(spec).weights);
    const int64_t M = 5;
    const auto x = varied_activations(M, p.K, spec.seed);
    LimbActivations a;
    ASSERT_TRUE(split_activation_limbs(p, x.data(), M, a));
    const int F = p.fields, U = 8 / p.storage_bits;
    const double two_sb = std::ldexp(1.0, p.storage_bits);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t g = 0; g < p.groups; ++g) {
        const double s = a.scales[m * p.groups + g] * two_sb;
        double amax = 0;
        for (int64_t r = p.group_words[g] * F; r < p.group_words[g + 1] * F; ++r)
          amax = std::max(amax, std::fabs(static_cast<double>(packed_value(p, x.data(), m, r))));
        EXPECT_EQ(static_cast<float>(s), static_cast<float>(amax / 127.0));
        int64_t sums[kVnniLimbs] = {};
        for (int64_t r = p.group_words[g] * F; r < p.group_words[g + 1] * F; ++r) {
          const int64_t w = r / F, j = r % F;
          double rebuilt = 0, weight = 1;
          for (int l = 0; l < kVnniLimbs; ++l) {
            const int d = limb_byte(a, p, m, l, w, static_cast<int>(j % U), static_cast<int>(j / U));
            ASSERT_GE(d, -127);
            ASSERT_LE(d, 127);
            rebuilt += d * weight;
            weight /= kVnniLimbBase;
            sums[l] += d;
          }
          const double v = packed_value(p, x.data(), m, r);
          EXPECT_LE(std::fabs(v - s * rebuilt), s * 0.5 / (254.0 * 254.0) + 1e-15 * std::fabs(v))
              << "m=" << m << " row=" << r << " x=" << v;
        }
        for (int l = 0; l < kVnniLimbs; ++l) EXPECT_EQ(a.sums[(m * p.groups + g) * kVnniLimbs + l], sums[l]);
      }
  }
}

// What the kernel computes for one 32-bit lane: for each unpack vector u, the code bytes
// (word >> SB*u) & mask times the four limb bytes, summed (vpdpbusd: unsigned x signed bytes).
// Over a word that must equal sum over its F fields of code * digit of that field's packed row.
TEST(Wna16VnniLimbs, LayoutPairsEveryCodeFieldWithItsRow) {
  std::mt19937_64 rng(42);
  for (const auto& spec : layout_specs()) {
    SCOPED_TRACE(fmt::format("bits={} K={} group={}", spec.bits, spec.K, spec.group_size));
    const PackedWna16 p = pack_wna16(testing::random_wna16(spec).weights);
    const int64_t M = 2;
    const auto x = varied_activations(M, p.K, spec.seed + 1);
    LimbActivations a;
    ASSERT_TRUE(split_activation_limbs(p, x.data(), M, a));
    const int SB = p.storage_bits, F = p.fields, U = 8 / SB;
    const uint32_t field_mask = (1u << SB) - 1u;
    for (int64_t m = 0; m < M; ++m)
      for (int l = 0; l < kVnniLimbs; ++l)
        for (int64_t w = 0; w < p.words; ++w) {
          const auto word = static_cast<uint32_t>(rng());
          int64_t lane = 0;
          for (int u = 0; u < U; ++u)
            for (int b = 0; b < 4; ++b) {
              const uint32_t code = SB == 8 ? (word >> (8 * b)) & 0xFFu : (word >> (SB * u + 8 * b)) & field_mask;
              lane += static_cast<int64_t>(code) * limb_byte(a, p, m, l, w, u, b);
            }
          // The same sum from the fields' own rows: digit l of packed row w*F + j, derived here.
          const int64_t g = p.word_group[w];
          const double s = a.scales[m * p.groups + g] * std::ldexp(1.0, SB);
          int64_t want = 0;
          for (int j = 0; j < F; ++j) {
            double q = s > 0 ? packed_value(p, x.data(), m, w * F + j) * (1.0 / s) : 0.0;
            double digit = 0;
            for (int i = 0; i <= l; ++i) {
              digit = std::nearbyint(q);
              q = (q - digit) * kVnniLimbBase;
            }
            want += static_cast<int64_t>((word >> (SB * j)) & field_mask) * static_cast<int64_t>(digit);
          }
          ASSERT_EQ(lane, want) << "m=" << m << " limb=" << l << " word=" << w;
        }
  }
}

TEST(Wna16VnniLimbs, Avx512SplitMatchesThePortableSplit) {
  if (!cpu_features().avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const auto& spec : layout_specs()) {
    SCOPED_TRACE(fmt::format("bits={} K={} group={}", spec.bits, spec.K, spec.group_size));
    const PackedWna16 p = pack_wna16(testing::random_wna16(spec).weights);
    for (int64_t M : {1, 3, 6}) {
      const auto x = varied_activations(M, p.K, spec.seed + M);
      LimbActivations want, got;
      ASSERT_TRUE(split_activation_limbs(p, x.data(), M, want));
      ASSERT_TRUE(split_activation_limbs_avx512(p, x.data(), M, got));
      const size_t limb_words = static_cast<size_t>(M * kVnniLimbs * p.words * (8 / p.storage_bits));
      EXPECT_EQ(std::memcmp(got.limbs.data(), want.limbs.data(), limb_words * 4), 0) << "M=" << M;
      for (int64_t i = 0; i < M * p.groups; ++i) EXPECT_EQ(got.scales[i], want.scales[i]) << i;
      for (int64_t i = 0; i < M * p.groups * kVnniLimbs; ++i) EXPECT_EQ(got.sums[i], want.sums[i]) << i;
    }
  }
}

TEST(Wna16VnniLimbs, DeclinesNonFiniteAndSubnormalScaledGroups) {
  const PackedWna16 p = pack_wna16(testing::random_wna16({.bits = 4, .K = 256, .N = 32, .group_size = 128}).weights);
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e-37f}) {
    SCOPED_TRACE(bad);
    std::vector<float> x = testing::random_floats(2 * 256, 3);
    if (bad == 1e-37f)
      for (int k = 128; k < 256; ++k) x[256 + k] = bad * (k % 2 ? 1.0f : -0.5f);  // row 1, group 1
    else
      x[256 + 200] = bad;
    LimbActivations a;
    EXPECT_FALSE(split_activation_limbs(p, x.data(), 2, a));
    if (cpu_features().avx512) {
      EXPECT_FALSE(split_activation_limbs_avx512(p, x.data(), 2, a));
    }
  }
  // An all-zero group is fine: scale 0, digits 0.
  std::vector<float> x(256, 0.0f);
  x[3] = 0.25f;
  LimbActivations a;
  ASSERT_TRUE(split_activation_limbs(p, x.data(), 1, a));
  EXPECT_EQ(a.scales[1], 0.0f);
  for (int l = 0; l < kVnniLimbs; ++l) EXPECT_EQ(a.sums[kVnniLimbs + l], 0);
}

TEST(Wna16VnniLimbs, SumsFitBoundIsExact) {
  // 8-bit codes: 127 * (2^9 - 1) per row, so 33090 rows (8272 words of 4) fit and 8273 words do not.
  PackedWna16 p;
  p.storage_bits = 8;
  p.fields = 4;
  p.groups = 2;
  p.group_words = {0, 10, 10 + 8272};
  EXPECT_TRUE(wna16_vnni_sums_fit(p));
  p.group_words = {0, 8273, 8283};
  EXPECT_FALSE(wna16_vnni_sums_fit(p));
  // 4-bit codes: 127 * 31 per row, so 545461 rows: 68182 words of 8 fit, 68183 do not.
  p.storage_bits = 4;
  p.fields = 8;
  p.groups = 1;
  p.group_words = {0, 68182};
  EXPECT_TRUE(wna16_vnni_sums_fit(p));
  p.group_words = {0, 68183};
  EXPECT_FALSE(wna16_vnni_sums_fit(p));
}

std::unique_ptr<MPLinearKernel> vnni_kernel(const Wna16Spec& s, const WNA16Weights& w) {
  MPLinearLayerConfig c;
  c.K = c.K_p = s.K;
  c.N = c.N_p = s.N;
  c.weight_type = w.weight_type;
  c.zero_points = s.zero_points;
  c.has_g_idx = s.act_order;
  c.group_size = s.group_size;
  c.act_dtype = DType::F32;
  c.device = Device::cpu();
  const auto* entry = MPKernelRegistry::instance().find("cpu_fast_avx512_vnni");
  if (!entry || entry->can_implement(c)) return nullptr;
  auto kernel = entry->create(c);
  kernel->prepare(w);
  return kernel;
}

double row_error(const float* got, const std::vector<double>& want, int64_t m, int64_t N) {
  return testing::normwise_error(got + m * N, std::vector<double>(want.begin() + m * N, want.begin() + (m + 1) * N));
}

// Every row on its own within the fast kernels' tolerance, including the outlier and 1e-20 rows.
TEST(Wna16VnniKernel, EveryRowAccurateWithOutliersAndTinyRows) {
  if (!cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  for (const auto& spec : layout_specs()) {
    SCOPED_TRACE(fmt::format("bits={} K={} group={}", spec.bits, spec.K, spec.group_size));
    const auto gen = testing::random_wna16(spec);
    auto kernel = vnni_kernel(spec, gen.weights);
    ASSERT_TRUE(kernel);
    const int64_t M = 9, K = spec.K, N = spec.N;
    const auto x = varied_activations(M, K, spec.seed + 7);
    const auto want = testing::matmul_f64(x, gen.dequant, nullptr, M, K, N);
    Tensor y = Tensor::empty({M, N}, DType::F32);
    std::fill(y.span<float>().begin(), y.span<float>().end(), std::numeric_limits<float>::quiet_NaN());
    kernel->run(Tensor::from_vector(x, {M, K}), y, nullptr);
    ASSERT_EQ(testing::first_non_finite(y.data<float>(), M * N), -1);
    for (int64_t m = 0; m < M; ++m) EXPECT_LE(row_error(y.data<float>(), want, m, N), 1e-5) << "row " << m;
  }
}

// Declined activations run on the float code: a NaN or infinity reaches every output of its row
// (and only its row), as on every other CPU kernel.
TEST(Wna16VnniKernel, NonFiniteActivationsReachTheirRow) {
  if (!cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const Wna16Spec spec{.bits = 4, .K = 256, .N = 40, .group_size = 128, .zero_points = true, .seed = 8};
  const auto gen = testing::random_wna16(spec);
  auto kernel = vnni_kernel(spec, gen.weights);
  ASSERT_TRUE(kernel);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto x = testing::random_floats(3 * 256, 9);
    x[256 + 17] = bad;
    const auto want = testing::matmul_f64(x, gen.dequant, nullptr, 3, 256, 40);
    Tensor y = Tensor::zeros({3, 40}, DType::F32);
    kernel->run(Tensor::from_vector(x, {3, 256}), y, nullptr);
    const float* out = y.data<float>();
    for (int64_t n = 0; n < 40; ++n) EXPECT_FALSE(std::isfinite(out[40 + n])) << n;
    EXPECT_LE(row_error(out, want, 0, 40), 1e-5);
    EXPECT_LE(row_error(out, want, 2, 40), 1e-5);
  }
  // The integer kernel itself declines without writing y.
  const PackedWna16 p = pack_wna16(gen.weights);
  auto x = testing::random_floats(256, 10);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(40, 7.0f);
  EXPECT_FALSE(wna16_vnni_gemv(p, x.data(), 1, y.data(), nullptr, compute_pool()));
  for (float v : y) EXPECT_EQ(v, 7.0f);
}

// A channelwise 8-bit layer at the largest group the int32 sums allow (33088 rows), every code at
// its maximum and every activation at its group's maximum: the sums reach 1.07e9 and stay exact.
TEST(Wna16VnniKernel, ExactAtTheInt32Bound) {
  if (!cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const int64_t K = 33088, N = 16;
  WNA16Weights w;
  w.weight_type = PackedIntType{8, 128};
  w.K = K;
  w.N = N;
  w.group_size = K;
  w.qweight = testing::pack_codes_sequential(std::vector<uint32_t>(static_cast<size_t>(K * N), 255u), K, N, 8);
  std::vector<float> scales(N);
  for (int64_t n = 0; n < N; ++n) scales[n] = 0.001f * static_cast<float>(n + 1);
  w.scales = Tensor::from_vector(scales, {1, N});
  const PackedWna16 p = pack_wna16(w);
  ASSERT_TRUE(wna16_vnni_sums_fit(p));
  for (float value : {1.0f, -3.0f}) {
    const std::vector<float> x(static_cast<size_t>(K), value);
    std::vector<float> y(N, 0.0f);
    ASSERT_TRUE(wna16_vnni_gemv(p, x.data(), 1, y.data(), nullptr, compute_pool()));
    for (int64_t n = 0; n < N; ++n) {
      const double want = static_cast<double>(K) * value * 127.0 * scales[n];
      EXPECT_NEAR(y[n], want, std::fabs(want) * 1e-6) << n;
    }
  }
}

}  // namespace
}  // namespace qlm
