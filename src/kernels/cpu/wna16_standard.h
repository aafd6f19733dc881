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

// Code of row k, column n of a GPTQ-layout qweight [ceil(K*bits/32), N]: the bits of column n form
// one little-endian bit stream along K, field k at bit k*bits (3-bit fields straddle words).
inline uint32_t wna16_code(const int32_t* qweight, int64_t N, int64_t k, int64_t n, int bits) {
  int64_t bit = k * bits;
  int64_t word = bit >> 5;
  int shift = static_cast<int>(bit & 31);
  uint64_t lo = static_cast<uint32_t>(qweight[word * N + n]);
  if (shift + bits > 32) lo |= static_cast<uint64_t>(static_cast<uint32_t>(qweight[(word + 1) * N + n])) << 32;
  return static_cast<uint32_t>(lo >> shift) & ((1u << bits) - 1u);
}

// Checks shapes and dtypes of `w` against its own K, N, bits and group size; throws
// `kernel.weights` naming the offending tensor.
void check_wna16_weights(const WNA16Weights& w);

}  // namespace qlm
