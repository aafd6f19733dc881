#include "kernels/cuda/wna16_layout.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "kernels/cpu/wna16_standard.h"

namespace qlm {

uint32_t cuda_wna16_code(const CudaWna16Layout& layout, int64_t j, int64_t n) {
  const int64_t bit = j * layout.bits;
  const int shift = static_cast<int>(bit & 31);
  uint64_t v = layout.codes[static_cast<size_t>((bit >> 5) * layout.N_pad + n)];
  if (shift + layout.bits > 32)
    v |= static_cast<uint64_t>(layout.codes[static_cast<size_t>(((bit >> 5) + 1) * layout.N_pad + n)]) << 32;
  return static_cast<uint32_t>(v >> shift) & ((1u << layout.bits) - 1u);
}

CudaWna16Layout pack_cuda_wna16(const WNA16Weights& w) {
  check_wna16_weights(w);
  CudaWna16Layout L;
  L.bits = w.weight_type.bits;
  L.implied_zero = w.weight_type.bias;
  L.K = w.K;
  L.N = w.N;
  L.N_pad = (w.N + CudaWna16Layout::kColumnAlign - 1) / CudaWna16Layout::kColumnAlign * CudaWna16Layout::kColumnAlign;
  L.groups = w.num_groups();
  const int64_t chunk_rows = cuda_wna16_chunk_rows(L.bits);
  const int64_t chunk_words = cuda_wna16_chunk_words(L.bits);

  // Group of every input row, then the rows in group order (stable: ties keep input order).
  std::vector<int32_t> group(static_cast<size_t>(w.K));
  const int32_t* g_idx = w.g_idx.defined() ? w.g_idx.data<int32_t>() : nullptr;
  for (int64_t k = 0; k < w.K; ++k) group[k] = g_idx ? g_idx[k] : static_cast<int32_t>(k / w.group_size);
  std::vector<int32_t> order(static_cast<size_t>(w.K));
  std::iota(order.begin(), order.end(), 0);
  if (g_idx) std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return group[a] < group[b]; });

  // Each run of one group, padded to whole chunks.
  for (size_t begin = 0; begin < order.size();) {
    const int32_t g = group[order[begin]];
    size_t end = begin;
    while (end < order.size() && group[order[end]] == g) L.row_source.push_back(order[end++]);
    const int64_t run = static_cast<int64_t>(end - begin);
    const int64_t run_chunks = (run + chunk_rows - 1) / chunk_rows;
    L.row_source.resize(L.row_source.size() + static_cast<size_t>(run_chunks * chunk_rows - run), -1);
    L.chunk_group.insert(L.chunk_group.end(), static_cast<size_t>(run_chunks), g);
    begin = end;
  }
  L.chunks = static_cast<int64_t>(L.chunk_group.size());
  L.rows = L.chunks * chunk_rows;

  // Identity: packed row j is input row j for every j < K (only the tail is padding).
  bool identity = true;
  for (int64_t j = 0; j < w.K && identity; ++j) identity = L.row_source[j] == j;

  const int32_t* q = w.qweight.data<int32_t>();
  const int64_t in_words = w.qweight.size(0);
  L.codes.assign(static_cast<size_t>(L.chunks * chunk_words * L.N_pad), 0u);
  if (identity) {
    compute_pool().parallel_for(0, in_words, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(L.codes.data() + r * L.N_pad, q + r * w.N, static_cast<size_t>(w.N) * sizeof(uint32_t));
    });
  } else {
    // Columns own disjoint words, so column ranges pack in parallel; per packed row, its source field's
    // word(s) and its destination word(s) are fixed, and the loop runs over the range's columns.
    compute_pool().parallel_for(0, w.N, 64, [&](int64_t n0, int64_t n1) {
      for (int64_t j = 0; j < L.rows; ++j) {
        const int32_t r = L.row_source[j];
        if (r < 0) continue;
        const Wna16RowFields row(q, w.N, r, L.bits);
        const int64_t dst_bit = j * L.bits;
        const int dst_shift = static_cast<int>(dst_bit & 31);
        const bool dst_two = dst_shift + L.bits > 32;
        uint32_t* out = L.codes.data() + (dst_bit >> 5) * L.N_pad;
        row.for_columns(n0, n1, [&](int64_t n, uint32_t code) {
          const uint64_t field = static_cast<uint64_t>(code) << dst_shift;
          out[n] |= static_cast<uint32_t>(field);
          if (dst_two) out[n + L.N_pad] |= static_cast<uint32_t>(field >> 32);
        });
      }
    });
  }

  const float* s = w.scales.data<float>();
  L.scales.assign(static_cast<size_t>(L.groups * L.N_pad), 0.0f);
  for (int64_t g = 0; g < L.groups; ++g) std::copy(s + g * w.N, s + (g + 1) * w.N, L.scales.begin() + g * L.N_pad);
  if (w.zeros.defined()) {
    const int32_t* z = w.zeros.data<int32_t>();  // checked: every zero point is in [0, max_code] <= 255
    L.zeros.assign(static_cast<size_t>(L.groups * L.N_pad), 0);
    for (int64_t g = 0; g < L.groups; ++g)
      for (int64_t n = 0; n < w.N; ++n) L.zeros[g * L.N_pad + n] = static_cast<uint8_t>(z[g * w.N + n]);
  }
  return L;
}

bool cuda_wna16_groups_in_quads(const CudaWna16Layout& layout) {
  if (layout.chunks % 4 != 0) return false;
  for (int64_t c = 0; c < layout.chunks; c += 4)
    for (int64_t i = 1; i < 4; ++i)
      if (layout.chunk_group[static_cast<size_t>(c + i)] != layout.chunk_group[static_cast<size_t>(c)]) return false;
  return true;
}

}  // namespace qlm
