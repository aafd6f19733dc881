// Reading the WNA16 standard form (quant/wna16_weights.h) element by element. Independent of the
// packing library so that the reference kernel and the repackers check the layout themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "quant/wna16_weights.h"

namespace qlm {

struct MPLinearLayerConfig;
// What every CPU WNA16 kernel can run: bits 2/3/4/8, F32/BF16/F16 activations, any valid group,
// zero points and g_idx. nullopt when `c` is runnable, else the reason (cpu_ref's full rule; the
// fast kernels add their ISA check in front).
std::optional<std::string> cpu_wna16_can_implement(const MPLinearLayerConfig& c);

// Row k of a GPTQ-layout qweight [ceil(K*bits/32), N]: the bits of column n form one little-endian bit
// stream along K, field k at bit k*bits (3-bit fields straddle words). The field's word(s) and shift are
// found once, so a loop over the row's columns (the repackers) reads each code with a shift and a mask.
struct Wna16RowFields {
  Wna16RowFields(const int32_t* qweight, int64_t N, int64_t k, int bits)
      : lo(reinterpret_cast<const uint32_t*>(qweight) + ((k * bits) >> 5) * N),
        N(N),
        shift(static_cast<int>((k * bits) & 31)),
        straddles(shift + bits > 32),
        mask((1u << bits) - 1u) {}
  // Code of column n.
  uint32_t operator()(int64_t n) const {
    uint64_t v = lo[n];
    if (straddles) v |= static_cast<uint64_t>(lo[n + N]) << 32;
    return static_cast<uint32_t>(v >> shift) & mask;
  }
  // fn(n, code) for columns [n0, n1), the straddle test taken once outside the loop and the fields in locals (fn's
  // stores cannot alias them), so the loop vectorizes.
  template <typename Fn>
  void for_columns(int64_t n0, int64_t n1, Fn&& fn) const {
    const uint32_t* const l = lo;
    const int64_t stride = N;
    const int s = shift;
    const uint32_t m = mask;
    if (straddles) {
      for (int64_t n = n0; n < n1; ++n)
        fn(n, static_cast<uint32_t>((l[n] | static_cast<uint64_t>(l[n + stride]) << 32) >> s) & m);
    } else {
      for (int64_t n = n0; n < n1; ++n) fn(n, (l[n] >> s) & m);
    }
  }

  const uint32_t* lo;  // the word row holding the field's first bit
  int64_t N;
  int shift;
  bool straddles;  // the field continues in the next word row
  uint32_t mask;
};

// Code of row k, column n of a GPTQ-layout qweight (one element: Wna16RowFields for a row's columns).
inline uint32_t wna16_code(const int32_t* qweight, int64_t N, int64_t k, int64_t n, int bits) {
  return Wna16RowFields(qweight, N, k, bits)(n);
}

// Checks shapes and dtypes of `w` against its own K, N, bits and group size; throws
// `kernel.weights` naming the offending tensor.
void check_wna16_weights(const WNA16Weights& w);

}  // namespace qlm
