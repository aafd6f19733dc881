#include "kernels/cuda/wna16_fast_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/wna16_standard.h"

namespace qlm {

uint16_t wna16_fast_to_half_bits(float v, bool bf16) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (bf16) {
    if (std::isnan(v)) return 0x7FC0;
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  // f16, round to nearest even (normals, subnormals, overflow to inf).
  const uint32_t sign = (u >> 16) & 0x8000u;
  const float a = std::fabs(v);
  if (std::isnan(v)) return static_cast<uint16_t>(sign | 0x7E00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a < 6.103515625e-05f) {                         // subnormal: multiples of 2^-24
    const float q = std::nearbyint(a * 16777216.0f);  // default rounding: to nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t au;
  std::memcpy(&au, &a, 4);
  const uint32_t mant = au & 0x7FFFFFu;
  const int exp = static_cast<int>(au >> 23) - 127 + 15;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | h);
}

float wna16_fast_from_half_bits(uint16_t h, bool bf16) {
  uint32_t u;
  if (bf16) {
    u = static_cast<uint32_t>(h) << 16;
  } else {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    if (exp == 0) {
      const float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
    u = exp == 31 ? sign | 0x7F800000u | (mant << 13) : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

namespace {

// Position of code (packed row j, column n) in the codes array: u32 index and bit shift.
struct CodePos {
  size_t word;
  int shift;
};

CodePos code_pos(const Wna16FastLayout& L, int64_t j, int64_t n) {
  const int64_t kt = j / 16, r = j % 16, t = r / 4, within = r % 4;  // within: 0..3 = 4t + within
  const int64_t b = n / 64, c = n % 64, tile = c / 16, col = c % 16, g = col % 8, half = col / 8;
  const int p = static_cast<int>(2 * (within / 2) + half);  // A register a_p
  const int second = static_cast<int>(within % 2);          // second row of the pair
  const int64_t lane = g * 4 + t;
  if (L.bits == 4) {
    const size_t word = static_cast<size_t>(((b * L.k_tiles + kt) * 32 + lane) * 4 + tile);
    return {word, 4 * (p + 4 * second)};
  }
  const int64_t v = tile / 2, u = (tile % 2) * 2 + p / 2;
  const size_t word = static_cast<size_t>((((b * L.k_tiles + kt) * 2 + v) * 32 + lane) * 4 + u);
  return {word, 8 * ((p % 2) + 2 * second)};
}

size_t param_index(const Wna16FastLayout& L, int64_t g, int64_t n) {
  const int64_t b = n / 64, c = n % 64, tile = c / 16, col = c % 16;
  return static_cast<size_t>(((g * L.n_blocks + b) * 8 + col % 8) * 8 + 2 * tile + col / 8);
}

}  // namespace

uint32_t wna16_fast_code(const Wna16FastLayout& L, int64_t j, int64_t n) {
  const CodePos pos = code_pos(L, j, n);
  return (L.codes[pos.word] >> pos.shift) & ((1u << L.bits) - 1u);
}

float wna16_fast_scale(const Wna16FastLayout& L, int64_t g, int64_t n) {
  return wna16_fast_from_half_bits(L.scales[param_index(L, g, n)], L.bf16);
}

int wna16_fast_zero(const Wna16FastLayout& L, int64_t g, int64_t n) {
  const uint16_t h = L.zeros.empty() ? static_cast<uint16_t>(L.zero_const & 0xFFFFu) : L.zeros[param_index(L, g, n)];
  return static_cast<int>(wna16_fast_from_half_bits(h, L.bf16)) - L.zero_base;
}

Wna16FastLayout pack_wna16_fast(const WNA16Weights& w, bool bf16) {
  check_wna16_weights(w);
  const int bits = w.weight_type.bits;
  if (bits != 4 && bits != 8)
    fail("kernel.weights", {}, "this is a bug in kernel selection", "cuda_wna16_fast: {}-bit weights (4 or 8 only)",
         bits);
  Wna16FastLayout L;
  L.bits = bits;
  L.bf16 = bf16;
  L.K = w.K;
  L.N = w.N;
  L.N_pad = (w.N + 63) / 64 * 64;
  L.n_blocks = L.N_pad / 64;
  L.groups = w.num_groups();
  L.zero_base = !bf16 ? 1024 : bits == 4 ? 128 : 0;

  // Rows: group by group, every group padded to the same multiple of 16.
  std::vector<int32_t> group(static_cast<size_t>(w.K));
  const int32_t* g_idx = w.g_idx.defined() ? w.g_idx.data<int32_t>() : nullptr;
  std::vector<int64_t> count(static_cast<size_t>(L.groups), 0);
  for (int64_t k = 0; k < w.K; ++k) {
    group[k] = g_idx ? g_idx[k] : static_cast<int32_t>(k / w.group_size);
    ++count[group[k]];
  }
  const int64_t max_count = std::max<int64_t>(1, *std::max_element(count.begin(), count.end()));
  L.rows_per_group = (max_count + 15) / 16 * 16;
  L.tiles_per_group = L.rows_per_group / 16;
  L.rows = L.groups * L.rows_per_group;
  L.k_tiles = L.rows / 16;
  L.row_source.assign(static_cast<size_t>(L.rows), -1);
  std::vector<int64_t> fill(static_cast<size_t>(L.groups), 0);
  for (int64_t k = 0; k < w.K; ++k) {
    const int32_t g = group[k];
    L.row_source[static_cast<size_t>(g * L.rows_per_group + fill[g]++)] = static_cast<int32_t>(k);
  }
  L.identity_rows = L.rows == w.K;
  for (int64_t j = 0; j < L.rows && L.identity_rows; ++j) L.identity_rows = L.row_source[j] == j;

  // Codes: every (row, column) written once; column blocks own disjoint words. code_pos is affine in
  // the block and the k-tile (both only move the word by multiples of one k-tile's words), so the
  // position of row j % 16 and column n % 64 inside its block's k-tile comes from a table, and a
  // row's 64 codes of a block are one run of qweight words (4- and 8-bit fields never straddle words).
  const int32_t* q = w.qweight.data<int32_t>();
  L.codes.assign(static_cast<size_t>(L.n_blocks * L.k_tiles * 32 * 4 * L.vectors()), 0u);
  std::vector<CodePos> in_tile(16 * 64);
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 64; ++c) in_tile[r * 64 + c] = code_pos(L, r, c);
  const size_t tile_words = code_pos(L, 16, 0).word - code_pos(L, 0, 0).word;
  compute_pool().parallel_for(0, L.n_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t cols = std::min<int64_t>(64, w.N - b * 64);
      for (int64_t j = 0; j < L.rows; ++j) {
        const int32_t r = L.row_source[j];
        if (r < 0) continue;
        const Wna16RowFields row(q, w.N, r, bits);
        uint32_t* tile = L.codes.data() + static_cast<size_t>(b * L.k_tiles + j / 16) * tile_words;
        const CodePos* pos = in_tile.data() + (j % 16) * 64;
        row.for_columns(b * 64, b * 64 + cols,
                        [&](int64_t n, uint32_t code) { tile[pos[n - b * 64].word] |= code << pos[n - b * 64].shift; });
      }
    }
  });

  const float* s = w.scales.data<float>();
  const int32_t* z = w.zeros.defined() ? w.zeros.data<int32_t>() : nullptr;
  L.scales.assign(static_cast<size_t>(L.groups * L.N_pad), 0);
  if (z)
    L.zeros.assign(static_cast<size_t>(L.groups * L.N_pad),
                   wna16_fast_to_half_bits(static_cast<float>(L.zero_base), bf16));
  for (int64_t g = 0; g < L.groups; ++g)
    for (int64_t n = 0; n < w.N; ++n) {
      const size_t i = param_index(L, g, n);
      L.scales[i] = wna16_fast_to_half_bits(s[g * w.N + n], bf16);
      if (z) L.zeros[i] = wna16_fast_to_half_bits(static_cast<float>(L.zero_base + z[g * w.N + n]), bf16);
    }
  const uint32_t zc = wna16_fast_to_half_bits(static_cast<float>(L.zero_base + w.weight_type.bias), bf16);
  L.zero_const = zc | (zc << 16);
  return L;
}

}  // namespace qlm
