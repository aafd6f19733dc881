#include "kernels/cpu/wna16_layout.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/wna16_standard.h"

namespace qlm {

PackedWna16 pack_wna16(const WNA16Weights& w) {
  check_wna16_weights(w);
  PackedWna16 p;
  p.bits = w.weight_type.bits;
  p.storage_bits = p.bits == 3 ? 4 : p.bits;
  p.fields = 32 / p.storage_bits;
  p.K = w.K;
  p.N = w.N;
  p.groups = w.num_groups();
  p.tiles = (w.N + kTileN - 1) / kTileN;
  p.has_zeros = w.zeros.defined();
  const double two_sb = static_cast<double>(1 << p.storage_bits);
  p.sym_zero = static_cast<float>(1.0 + w.weight_type.bias / two_sb);  // exact: at most 9 bits

  // Rows grouped (stable), each group padded to whole words.
  const int32_t* g_idx = w.g_idx.defined() ? w.g_idx.data<int32_t>() : nullptr;
  auto group_of = [&](int64_t k) { return g_idx ? int64_t{g_idx[k]} : k / w.group_size; };
  std::vector<int64_t> count(p.groups, 0);
  for (int64_t k = 0; k < w.K; ++k) ++count[group_of(k)];
  p.group_words.assign(p.groups + 1, 0);
  for (int64_t g = 0; g < p.groups; ++g) p.group_words[g + 1] = p.group_words[g] + (count[g] + p.fields - 1) / p.fields;
  p.words = p.group_words[p.groups];
  p.rows = p.words * p.fields;
  p.word_group.resize(p.words);
  for (int64_t g = 0; g < p.groups; ++g)
    std::fill(p.word_group.begin() + p.group_words[g], p.word_group.begin() + p.group_words[g + 1],
              static_cast<int32_t>(g));
  std::vector<int32_t> source(p.rows, -1);
  std::vector<int64_t> next(p.groups);
  for (int64_t g = 0; g < p.groups; ++g) next[g] = p.group_words[g] * p.fields;
  for (int64_t k = 0; k < w.K; ++k) source[next[group_of(k)]++] = static_cast<int32_t>(k);
  bool identity = p.rows == w.K;
  for (int64_t r = 0; identity && r < p.rows; ++r) identity = source[r] == r;
  if (!identity) p.row_source = std::move(source);

  const int32_t* q = w.qweight.data<int32_t>();
  const float* s = w.scales.data<float>();
  const int32_t* z = p.has_zeros ? w.zeros.data<int32_t>() : nullptr;
  p.codes.resize(static_cast<size_t>(p.tiles * p.words * kTileN));
  p.scales.resize(static_cast<size_t>(p.tiles * p.groups * kTileN));
  if (p.has_zeros) p.zeros.resize(p.scales.size());

  // Rows in input order with codes of a whole field width: word wd of column n is qweight's word
  // [wd, n] as it stands (field j = row wd * F + j at bits j * SB in both), so a tile is a copy.
  const bool same_words = p.row_source.empty() && p.bits == p.storage_bits;
  compute_pool().parallel_for(0, p.tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t cols = std::min<int64_t>(kTileN, w.N - t * kTileN);
      for (int64_t wd = 0; wd < p.words; ++wd) {
        uint32_t* out = p.codes.data() + (t * p.words + wd) * kTileN;
        if (same_words) {
          std::memcpy(out, q + wd * w.N + t * kTileN, static_cast<size_t>(cols) * sizeof(uint32_t));
          std::fill(out + cols, out + kTileN, 0u);
          continue;
        }
        // Otherwise field j of every column of the tile at once: packed row wd * F + j reads input row
        // k's field across the tile's columns.
        std::fill(out, out + kTileN, 0u);
        for (int j = 0; j < p.fields; ++j) {
          const int64_t r = wd * p.fields + j;
          const int64_t k = p.row_source.empty() ? r : p.row_source[r];
          if (k < 0) continue;  // group padding: code 0
          const Wna16RowFields row(q, w.N, k, p.bits);
          const int to = j * p.storage_bits;
          const int64_t n0 = t * kTileN;
          row.for_columns(n0, n0 + cols, [out, n0, to](int64_t n, uint32_t code) { out[n - n0] |= code << to; });
        }
      }
      for (int64_t g = 0; g < p.groups; ++g) {
        float* sc = p.scales.data() + (t * p.groups + g) * kTileN;
        float* zf = p.has_zeros ? p.zeros.data() + (t * p.groups + g) * kTileN : nullptr;
        for (int c = 0; c < kTileN; ++c) {
          const int64_t n = t * kTileN + c;
          const bool real = n < w.N;
          const double scale = real ? s[g * w.N + n] : 0.0;
          sc[c] = static_cast<float>(scale * two_sb);
          if (zf) zf[c] = real ? static_cast<float>(1.0 + z[g * w.N + n] / two_sb) : 0.0f;
        }
      }
    }
  });
  return p;
}

}  // namespace qlm
