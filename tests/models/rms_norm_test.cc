#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/ops/activation.h"
#include "runtime/ops/rms_norm.h"

namespace qlm::ops {
namespace {

TEST(RmsNorm, MatchesDoubleFormula) {
  for (int64_t rows : {1, 3, 1500}) {  // the last spreads over the thread pool
    const int64_t dim = 48;
    std::vector<float> x(static_cast<size_t>(rows * dim)), w(static_cast<size_t>(dim)), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i)) * 3.0f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + 0.01f * static_cast<float>(i);
    rms_norm(x.data(), dim, w.data(), y.data(), dim, rows, dim, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i)
        EXPECT_NEAR(y[r * dim + i], w[i] * x[r * dim + i] * inv, 1e-5) << r << "," << i;
    }
  }
}

TEST(RmsNorm, InPlaceWithStrides) {
  // Two heads of 4 inside rows of 10 (q/k norm on a fused qkv row).
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<float> w = {1, 1, 1, 1};
  rms_norm(x.data(), 4, w.data(), x.data(), 4, 2, 4, 0.0f);
  const double inv0 = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0), inv1 = 1.0 / std::sqrt((25 + 36 + 49 + 64) / 4.0);
  EXPECT_NEAR(x[0], 1 * inv0, 1e-6);
  EXPECT_NEAR(x[4], 5 * inv1, 1e-6);
  EXPECT_EQ(x[8], 9);  // untouched
}

TEST(SiluAndMul, MatchesFormula) {
  const std::vector<float> gate_up = {-2, 0, 3, 1, 2, 0.5f};  // one row: gate {-2, 0, 3}, up {1, 2, 0.5}
  std::vector<float> out(3);
  silu_and_mul(gate_up.data(), out.data(), 1, 3);
  for (int i = 0; i < 3; ++i) {
    const double g = gate_up[i];
    EXPECT_NEAR(out[i], g / (1 + std::exp(-g)) * gate_up[3 + i], 1e-6);
  }
}

}  // namespace
}  // namespace qlm::ops
