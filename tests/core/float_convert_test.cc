// Exhaustive tests of the float conversions against independent references: the compiler's
// _Float16, exact decoding formulas with std::ldexp, and brute-force nearest-code search.
#include "core/float_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace qlm {
namespace {

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || f32_bits(a) == f32_bits(b); }

// Independent decoder from the format definition: (-1)^s * 2^(e-bias) * (1 + m/2^M), subnormals
// at e == 0.
double reference_decode(uint32_t code, int E, int M, bool ieee_specials, bool e4m3fn) {
  int sign = (code >> (E + M)) & 1;
  int e = (code >> M) & ((1 << E) - 1);
  int m = code & ((1 << M) - 1);
  int bias = (1 << (E - 1)) - 1;
  double s = sign ? -1.0 : 1.0;
  if (ieee_specials && e == (1 << E) - 1) return m == 0 ? s * INFINITY : NAN;
  if (e4m3fn && e == 15 && m == 7) return NAN;
  if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - bias - M);
  return s * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -M), e - bias);
}

// Nearest representable code to x among `codes` (finite ones), ties to the even code.
template <typename Decode>
uint32_t brute_force_nearest(double x, int ncodes, Decode decode) {
  double best_err = INFINITY;
  uint32_t best = 0;
  for (int c = 0; c < ncodes; ++c) {
    double v = decode(c);
    if (!std::isfinite(v)) continue;
    if (std::signbit(v) != std::signbit(x) && v != 0.0) continue;
    double err = std::fabs(v - x);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best_err = err;
      best = static_cast<uint32_t>(c);
    }
  }
  return best;
}

TEST(F16, DecodeEveryCodeMatchesFormulaAndCompiler) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float got = f16_to_f32(static_cast<uint16_t>(c));
    float want = static_cast<float>(reference_decode(c, 5, 10, true, false));
    ASSERT_TRUE(same_float(got, want)) << std::hex << c;
#ifdef __FLT16_MAX__
    uint16_t bits = static_cast<uint16_t>(c);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    ASSERT_TRUE(same_float(got, static_cast<float>(h))) << std::hex << c;
#endif
  }
}

TEST(F16, EncodeRoundTripsEveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = f16_to_f32(static_cast<uint16_t>(c));
    uint16_t back = f32_to_f16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(back)));
      EXPECT_EQ(back & 0x8000, c & 0x8000);
    } else {
      ASSERT_EQ(back, c) << std::hex << c;
    }
  }
}

TEST(F16, EncodeMidpointsRoundToEvenAndMatchCompiler) {
  // Every midpoint between adjacent positive finite codes, and its neighbours one ulp away.
  for (uint32_t c = 0; c < 0x7c00; ++c) {
    double lo = reference_decode(c, 5, 10, true, false);
    double hi = c + 1 == 0x7c00 ? 65536.0 : reference_decode(c + 1, 5, 10, true, false);
    float mid = static_cast<float>((lo + hi) / 2);  // exact in f32
    uint16_t want_mid = (c & 1) ? static_cast<uint16_t>(c + 1) : static_cast<uint16_t>(c);
    ASSERT_EQ(f32_to_f16(mid), want_mid) << std::hex << c;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), c) << std::hex << c;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, INFINITY)), c + 1) << std::hex << c;
    ASSERT_EQ(f32_to_f16(-mid), want_mid | 0x8000) << std::hex << c;
#ifdef __FLT16_MAX__
    _Float16 h = static_cast<_Float16>(mid);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(f32_to_f16(mid), hb);
#endif
  }
}

TEST(F16, SpecialsAndOverflow) {
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
}

TEST(F16, RandomFloatsMatchCompiler) {
#ifdef __FLT16_MAX__
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) {
    float f = f32_from_bits(rng());
    _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(got)));
    } else {
      ASSERT_EQ(got, hb) << f;
    }
  }
#else
  GTEST_SKIP() << "compiler has no _Float16";
#endif
}

TEST(BF16, EveryCodeRoundTripsAndMidpointsRoundToEven) {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = bf16_to_f32(static_cast<uint16_t>(c));
    ASSERT_EQ(f32_bits(f), c << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), c);
    if ((c & 0x7fff) >= 0x7f80) continue;  // no midpoint above the largest finite
    // Midpoint to the next code away from zero, and one f32 ulp on either side.
    uint32_t mid = (c << 16) | 0x8000u;
    uint16_t even = (c & 1) ? static_cast<uint16_t>(c + 1) : static_cast<uint16_t>(c);
    ASSERT_EQ(f32_to_bf16(f32_from_bits(mid)), even) << std::hex << c;
    ASSERT_EQ(f32_to_bf16(f32_from_bits(mid - 1)), c);
    ASSERT_EQ(f32_to_bf16(f32_from_bits(mid + 1)), c + 1);
  }
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f7fffff)), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  // A NaN whose payload lives only in the low 16 bits must stay NaN, not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f32_from_bits(0x7f800001)))));
}

struct Fp8Case {
  const char* name;
  int E, M;
  bool ieee;
  bool fn;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  float max_finite;
};

uint8_t e5m2_nonsat(float f) { return f32_to_e5m2(f); }

class Fp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8, DecodeEveryCodeMatchesFormula) {
  const auto& p = GetParam();
  for (uint32_t c = 0; c < 256; ++c) {
    float want = static_cast<float>(reference_decode(c, p.E, p.M, p.ieee, p.fn));
    ASSERT_TRUE(same_float(p.decode(static_cast<uint8_t>(c)), want)) << p.name << " code " << c;
  }
}

TEST_P(Fp8, EncodeRoundTripsEveryFiniteCode) {
  const auto& p = GetParam();
  for (uint32_t c = 0; c < 256; ++c) {
    float f = p.decode(static_cast<uint8_t>(c));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(p.decode(p.encode(f))));
      continue;
    }
    ASSERT_EQ(p.encode(f), c) << p.name << " code " << c;
  }
}

TEST_P(Fp8, EncodeIsNearestEvenOverRandomAndMidpointInputs) {
  const auto& p = GetParam();
  auto decode = [&](int c) { return static_cast<double>(p.decode(static_cast<uint8_t>(c))); };
  std::vector<float> inputs;
  for (int c = 0; c < 255; ++c) {
    double a = decode(c), b = decode(c + 1);
    if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) continue;
    float mid = static_cast<float>((a + b) / 2);
    inputs.insert(inputs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                                 std::nextafter(mid, -INFINITY)});
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-p.max_finite, p.max_finite);
  for (int i = 0; i < 20000; ++i) inputs.push_back(u(rng) * (i % 2 ? 1.0f : 1e-3f));
  for (float x : inputs) {
    if (std::fabs(x) > p.max_finite) continue;
    uint32_t want = brute_force_nearest(x, 256, decode);
    uint8_t got = p.encode(x);
    ASSERT_EQ(std::fabs(decode(got)), std::fabs(decode(want))) << p.name << " x=" << x;
  }
}

TEST_P(Fp8, Saturation) {
  const auto& p = GetParam();
  EXPECT_TRUE(std::isnan(p.decode(p.encode(NAN))));
  if (p.fn) {
    EXPECT_EQ(p.decode(p.encode(1e9f)), 448.0f);
    EXPECT_EQ(p.decode(p.encode(-1e9f)), -448.0f);
    EXPECT_EQ(p.decode(p.encode(INFINITY)), 448.0f);
    EXPECT_EQ(p.decode(p.encode(464.0f)), 448.0f);  // would round to the NaN code: saturates
  } else {
    EXPECT_EQ(p.decode(p.encode(1e9f)), INFINITY);
    EXPECT_EQ(p.decode(p.encode(-INFINITY)), -INFINITY);
    EXPECT_EQ(e5m2_to_f32(f32_to_e5m2(1e9f, /*saturate=*/true)), kE5M2Max);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, Fp8,
    ::testing::Values(Fp8Case{"e4m3fn", 4, 3, false, true, f32_to_e4m3, e4m3_to_f32, kE4M3Max},
                      Fp8Case{"e5m2", 5, 2, true, false, e5m2_nonsat, e5m2_to_f32, kE5M2Max}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Fp8, NanCodes) {
  int nan_e4m3 = 0, nan_e5m2 = 0;
  for (int c = 0; c < 256; ++c) {
    nan_e4m3 += e4m3_is_nan(static_cast<uint8_t>(c));
    nan_e5m2 += e5m2_is_nan(static_cast<uint8_t>(c));
    EXPECT_EQ(e4m3_is_nan(static_cast<uint8_t>(c)), std::isnan(e4m3_to_f32(static_cast<uint8_t>(c))));
    EXPECT_EQ(e5m2_is_nan(static_cast<uint8_t>(c)), std::isnan(e5m2_to_f32(static_cast<uint8_t>(c))));
  }
  EXPECT_EQ(nan_e4m3, 2);  // 0x7F and 0xFF
  EXPECT_EQ(nan_e5m2, 6);  // 0x7D-0x7F and 0xFD-0xFF
}

}  // namespace
}  // namespace qlm
