// Rotary embeddings: inv_freq of every rope_scaling type against the transformers formulas
// written out here in double, and the rotation itself (rotate_half layout, partial rotary).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <span>
#include <vector>

#include "runtime/ops/rope.h"

namespace qlm::ops {
namespace {

std::vector<double> base_freqs(double theta, int64_t dim) {
  std::vector<double> f;
  for (int64_t i = 0; i < dim; i += 2) f.push_back(std::pow(theta, -static_cast<double>(i) / static_cast<double>(dim)));
  return f;
}

void expect_near_rel(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * std::abs(want[i])) << "i=" << i;
}

RopeParams params(RopeType type, int64_t head_dim = 16) {
  RopeParams p;
  p.type = type;
  p.theta = 10000.0;
  p.head_dim = head_dim;
  p.rotary_dim = head_dim;
  p.max_position_embeddings = 32;
  return p;
}

TEST(Rope, DefaultInvFreq) {
  expect_near_rel(rope_inv_freq(params(RopeType::Default), 1), base_freqs(10000.0, 16));
  RopeParams p = params(RopeType::Default, 64);
  p.theta = 500000.0;
  expect_near_rel(rope_inv_freq(p, 1), base_freqs(500000.0, 64));
}

TEST(Rope, LinearDividesByFactor) {
  RopeParams p = params(RopeType::Linear);
  p.factor = 4.0;
  std::vector<double> want = base_freqs(10000.0, 16);
  for (double& f : want) f /= 4.0;
  expect_near_rel(rope_inv_freq(p, 1000), want);
}

TEST(Rope, DynamicRescalesBaseBeyondMaxPositions) {
  RopeParams p = params(RopeType::Dynamic);
  p.factor = 2.0;
  // Within max_position_embeddings the base is unchanged.
  expect_near_rel(rope_inv_freq(p, 10), base_freqs(10000.0, 16));
  expect_near_rel(rope_inv_freq(p, 32), base_freqs(10000.0, 16));
  // Beyond: base · (factor · len / mpe − (factor − 1)) ^ (dim / (dim − 2)).
  const double len = 50, dim = 16;
  const double base = 10000.0 * std::pow(2.0 * len / 32 - 1.0, dim / (dim - 2));
  expect_near_rel(rope_inv_freq(p, 50), base_freqs(base, 16));
}

TEST(Rope, Llama3CoversAllThreeBands) {
  RopeParams p = params(RopeType::Llama3);
  p.theta = 500000.0;
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 8192;
  const std::vector<double> base = base_freqs(500000.0, 16);
  std::vector<double> want;
  int high = 0, medium = 0, low = 0;
  for (double f : base) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < 8192.0 / 4.0) {
      want.push_back(f);
      ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      want.push_back(f / 8.0);
      ++low;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want.push_back((1 - smooth) * f / 8.0 + smooth * f);
      ++medium;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(medium, 0);
  EXPECT_GT(low, 0);
  expect_near_rel(rope_inv_freq(p, 1), want);
}

TEST(Rope, PartialRotaryUsesRotaryDim) {
  RopeParams p = params(RopeType::Default, 16);
  p.rotary_dim = 8;  // partial_rotary_factor 0.5
  expect_near_rel(rope_inv_freq(p, 1), base_freqs(10000.0, 8));
}

// x·cos + rotate_half(x)·sin on the first rotary_dim features, computed in double.
std::vector<double> rotate_reference(const std::vector<float>& x, int64_t head_dim, int64_t rotary_dim, int64_t pos,
                                     const std::vector<double>& inv) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(static_cast<float>(inv[static_cast<size_t>(i)])) * static_cast<double>(pos);
    const double x1 = x[static_cast<size_t>(i)], x2 = x[static_cast<size_t>(i + half)];
    y[static_cast<size_t>(i)] = x1 * std::cos(a) - x2 * std::sin(a);
    y[static_cast<size_t>(i + half)] = x2 * std::cos(a) + x1 * std::sin(a);
  }
  (void)head_dim;
  return y;
}

void check_rotation(RopeParams p) {
  const int64_t heads = 3, d = p.head_dim;
  const std::vector<int64_t> positions = {0, 1, 7, 40, 1000};
  const int64_t T = static_cast<int64_t>(positions.size());
  std::vector<float> x(static_cast<size_t>(T * heads * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
  const std::vector<float> original = x;
  apply_rope(rope_angles(p, positions), x.data(), T, heads * d, heads, d);
  const std::vector<double> inv = rope_inv_freq(p, 1001);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const size_t off = static_cast<size_t>((t * heads + h) * d);
      std::vector<float> in(original.begin() + static_cast<std::ptrdiff_t>(off),
                            original.begin() + static_cast<std::ptrdiff_t>(off + static_cast<size_t>(d)));
      const std::vector<double> want = rotate_reference(in, d, p.rotary_dim, positions[static_cast<size_t>(t)], inv);
      for (int64_t i = 0; i < d; ++i)
        EXPECT_NEAR(x[off + static_cast<size_t>(i)], want[static_cast<size_t>(i)], 2e-6)
            << rope_type_name(p.type) << " t=" << t << " h=" << h << " i=" << i;
    }
}

TEST(Rope, RotationMatchesFormulaForEveryType) {
  for (RopeType type : {RopeType::Default, RopeType::Linear, RopeType::Dynamic, RopeType::Llama3}) {
    RopeParams p = params(type);
    p.factor = 2.0;
    p.original_max_position_embeddings = 64;
    check_rotation(p);
  }
}

TEST(Rope, PartialRotaryLeavesTailUntouched) {
  RopeParams p = params(RopeType::Default, 16);
  p.rotary_dim = 8;
  check_rotation(p);
}

// The CUDA decode graph's table: row p is exactly rope_angles({p}) (cos, then sin) for every type, with dynamic
// scaling's per-length frequencies past max_position_embeddings (32 here) included; one position too.
TEST(Rope, TableRowsAreEachPositionsOwnAngles) {
  for (const RopeType type : {RopeType::Default, RopeType::Linear, RopeType::Dynamic, RopeType::Llama3}) {
    RopeParams p = params(type, 12);
    p.factor = 2.0;
    p.original_max_position_embeddings = 16;
    for (const int64_t positions : {int64_t{1}, int64_t{32}, int64_t{45}}) {
      const RopeTable t = rope_table(p, positions);
      ASSERT_EQ(t.half, 6);
      ASSERT_EQ(t.rows.size(), static_cast<size_t>(positions * 12));
      for (int64_t pos = 0; pos < positions; ++pos) {
        const RopeAngles a = rope_angles(p, std::span<const int64_t>(&pos, 1));
        for (int64_t i = 0; i < 6; ++i) {
          ASSERT_EQ(t.rows[static_cast<size_t>(pos * 12 + i)], a.cos[static_cast<size_t>(i)])
              << rope_type_name(type) << " position " << pos;
          ASSERT_EQ(t.rows[static_cast<size_t>(pos * 12 + 6 + i)], a.sin[static_cast<size_t>(i)])
              << rope_type_name(type) << " position " << pos;
        }
      }
    }
  }
}

}  // namespace
}  // namespace qlm::ops
