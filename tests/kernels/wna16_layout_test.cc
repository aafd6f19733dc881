// The cpu_fast layout decodes bit-exactly back to the standard form's codes, groups, scales and
// zero points, for every bit width, with and without act-order and group padding.
#include "kernels/cpu/wna16_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/cpu/wna16_standard.h"
#include "tests/kernels/wna16_random.h"

namespace qlm {
namespace {

void check_roundtrip(const testing::Wna16Spec& spec) {
  SCOPED_TRACE(fmt::format("bits={} K={} N={} group={} zp={} act={}", spec.bits, spec.K, spec.N, spec.group_size,
                           spec.zero_points, spec.act_order));
  const auto gen = testing::random_wna16(spec);
  const WNA16Weights& w = gen.weights;
  const PackedWna16 p = pack_wna16(w);
  ASSERT_EQ(p.rows, p.words * p.fields);
  ASSERT_EQ(p.fields * p.storage_bits, 32);
  // Every input row appears exactly once, within its own group's words.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t k = p.row_source.empty() ? r : p.row_source[r];
    if (k < 0) continue;
    EXPECT_TRUE(seen.insert(k).second) << "row " << k << " twice";
    const int64_t g = w.g_idx.defined() ? w.g_idx.data<int32_t>()[k] : k / w.group_size;
    EXPECT_EQ(p.word_group[r / p.fields], g);
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), w.K);
  // Decoding each packed element gives the original dequantized weight.
  const uint32_t mask = (1u << p.storage_bits) - 1u;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t k = p.row_source.empty() ? r : p.row_source[r];
    if (k < 0) continue;
    const int64_t wd = r / p.fields, j = r % p.fields, g = p.word_group[wd];
    for (int64_t n = 0; n < w.N; ++n) {
      const int64_t t = n / kTileN, c = n % kTileN;
      const uint32_t code = (p.codes[(t * p.words + wd) * kTileN + c] >> (j * p.storage_bits)) & mask;
      ASSERT_EQ(code, wna16_code(w.qweight.data<int32_t>(), w.N, k, n, w.weight_type.bits));
      const double f = 1.0 + code / static_cast<double>(1 << p.storage_bits);
      const double scale = p.scales[(t * p.groups + g) * kTileN + c];
      const double zero = p.has_zeros ? p.zeros[(t * p.groups + g) * kTileN + c] : p.sym_zero;
      // Exact: f - zero and the power-of-two scaling lose nothing.
      ASSERT_EQ((f - zero) * scale, gen.dequant[k * w.N + n]) << "k=" << k << " n=" << n;
    }
  }
  // Padded columns of the last tile hold code 0 and scale 0 (zero point 0).
  for (int64_t n = w.N; n < p.tiles * kTileN; ++n) {
    const int64_t t = n / kTileN, c = n % kTileN;
    for (int64_t wd = 0; wd < p.words; ++wd) ASSERT_EQ(p.codes[(t * p.words + wd) * kTileN + c], 0u) << n;
    for (int64_t g = 0; g < p.groups; ++g) ASSERT_EQ(p.scales[(t * p.groups + g) * kTileN + c], 0.0f) << n;
  }
}

TEST(Wna16Layout, RoundTripsEveryBitWidth) {
  for (int bits : {2, 3, 4, 8})
    for (bool zp : {false, true})
      for (bool act : {false, true}) {
        check_roundtrip({.bits = bits, .K = 96, .N = 45, .group_size = 32, .zero_points = zp, .act_order = act});
        check_roundtrip({.bits = bits, .K = 60, .N = 33, .group_size = 20, .zero_points = zp, .act_order = act});
        check_roundtrip({.bits = bits, .K = 37, .N = 7, .group_size = -1, .zero_points = zp, .act_order = false});
      }
}

TEST(Wna16Layout, IdentityRowsNeedNoSourceMap) {
  const auto gen = testing::random_wna16({.bits = 4, .K = 256, .N = 64, .group_size = 128});
  const PackedWna16 p = pack_wna16(gen.weights);
  EXPECT_TRUE(p.row_source.empty());
  EXPECT_EQ(p.rows, 256);
  EXPECT_EQ(p.weight_bytes(), 256 / 8 * 64 * 4 + 2 * 64 * 4u);
}

TEST(Wna16Layout, RejectsMalformedStandardForm) {
  auto gen = testing::random_wna16({.bits = 4, .K = 64, .N = 32, .group_size = 32, .act_order = true});
  std::vector<int32_t> bad(64, 0);
  bad[5] = 2;  // only groups 0 and 1 exist
  gen.weights.g_idx = Tensor::from_vector(bad, {64});
  EXPECT_THROW(pack_wna16(gen.weights), Error);
  auto gen2 = testing::random_wna16({.bits = 4, .K = 64, .N = 32, .group_size = 32, .zero_points = true});
  std::vector<int32_t> zeros(2 * 32, 16);  // 16 does not fit 4 bits
  gen2.weights.zeros = Tensor::from_vector(zeros, {2, 32});
  EXPECT_THROW(pack_wna16(gen2.weights), Error);
}

}  // namespace
}  // namespace qlm
