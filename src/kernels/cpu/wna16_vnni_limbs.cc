// ISA-independent half of the VNNI GEMV (wna16_vnni.h): the overflow bound and the exact split of
// the activations into 8-bit limbs.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

#include "kernels/cpu/wna16_vnni.h"

namespace qlm {

bool wna16_vnni_sums_fit(const PackedWna16& p) {
  int64_t max_rows = 0;
  for (int64_t g = 0; g < p.groups; ++g)
    max_rows = std::max<int64_t>(max_rows, (p.group_words[g + 1] - p.group_words[g]) * p.fields);
  const int64_t per_row = int64_t{127} * ((int64_t{2} << p.storage_bits) - 1);
  return max_rows <= INT32_MAX / per_row;
}

void LimbActivations::reserve(const PackedWna16& p, int64_t rows) {
  M = rows;
  limbs.reserve(static_cast<size_t>(rows * kVnniLimbs * p.words * (8 / p.storage_bits)));
  scales.reserve(static_cast<size_t>(rows * p.groups));
  sums.reserve(static_cast<size_t>(rows * p.groups * kVnniLimbs));
}

bool split_activation_limbs(const PackedWna16& p, const float* x, int64_t M, LimbActivations& out) {
  const int F = p.fields, U = 8 / p.storage_bits;
  const int32_t* source = p.row_source.empty() ? nullptr : p.row_source.data();
  out.reserve(p, M);
  auto* limbs = reinterpret_cast<int8_t*>(out.limbs.data());
  float* scales = out.scales.data();
  int32_t* sums = out.sums.data();
  const float two_minus_sb = std::ldexp(1.0f, -p.storage_bits);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * p.K;
    auto value = [&](int64_t r) {
      const int64_t k = source ? source[r] : r;
      return k >= 0 ? xr[k] : 0.0f;
    };
    for (int64_t g = 0; g < p.groups; ++g) {
      const int64_t r0 = p.group_words[g] * F, r1 = p.group_words[g + 1] * F;
      float amax = 0.0f;
      bool finite = true;
      for (int64_t r = r0; r < r1; ++r) {
        const float a = std::fabs(value(r));
        finite &= a <= FLT_MAX;  // false for NaN and infinities
        amax = a > amax ? a : amax;
      }
      if (!finite) return false;
      const float s = static_cast<float>(amax / 127.0);
      if (amax > 0.0f && s * two_minus_sb < FLT_MIN) return false;  // a subnormal scale would lose bits
      scales[m * p.groups + g] = s * two_minus_sb;
      // Decompose against the f32 scale actually stored, in double: q = x / s is exact to 2^-53
      // relative, so x0 = round(q) in [-127, 127] (amax / s <= 127 * (1 + 2^-24)) and each
      // residual, in [-1/2, 1/2], times 254 rounds to the next limb in [-127, 127].
      const double inv = amax > 0.0f ? 1.0 / static_cast<double>(s) : 0.0;
      int32_t sum[kVnniLimbs] = {};
      for (int64_t r = r0; r < r1; ++r) {
        double q = static_cast<double>(value(r)) * inv;
        const int64_t w = r / F, j = r % F, u = j % U, b = j / U;
        for (int l = 0; l < kVnniLimbs; ++l) {
          const double digit = std::nearbyint(q);
          const auto d = static_cast<int32_t>(digit);
          limbs[((m * kVnniLimbs + l) * p.words * U + w * U + u) * 4 + b] = static_cast<int8_t>(d);
          sum[l] += d;
          q = (q - digit) * kVnniLimbBase;
        }
      }
      std::memcpy(sums + (m * p.groups + g) * kVnniLimbs, sum, sizeof(sum));
    }
  }
  return true;
}

}  // namespace qlm
