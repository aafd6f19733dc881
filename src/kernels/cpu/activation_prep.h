// ISA-independent preparation of activations for the cpu_fast kernels.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace qlm {

// Row panels for the GEMM microkernels: rows [p*mr, p*mr + h) (h = min(mr, M - p*mr)) are stored
// from offset p*mr*rows as [rows][h] (column-interleaved). Packed row r of a panel reads input
// column source[r] (-1: zero); source == nullptr means column r. out holds M * rows floats.
void pack_row_panels(const float* x, int64_t M, int64_t K, int64_t rows, const int32_t* source, int mr,
                     float* out, ThreadPool& pool);

// Gathers x[M, K] into out[M, rows] by source (as above); used for act-order and padded groups.
void gather_columns(const float* x, int64_t M, int64_t K, int64_t rows, const int32_t* source, float* out);

// sums[m, g] = factor * sum of xg[m, r] over the packed rows of group g (words group_words[g] ..
// group_words[g+1], `fields` rows each); xg is [M, rows] with row stride ldx. Accumulates in double.
void group_sums(const float* xg, int64_t M, int64_t ldx, const int64_t* group_words, int64_t groups, int fields,
                float factor, float* sums);

}  // namespace qlm
