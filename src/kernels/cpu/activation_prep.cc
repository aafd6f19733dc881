#include "kernels/cpu/activation_prep.h"

namespace qlm {

void pack_row_panels(const float* x, int64_t M, int64_t K, int64_t rows, const int32_t* source, int mr,
                     float* out, ThreadPool& pool) {
  const int64_t panels = (M + mr - 1) / mr;
  pool.run(panels, [&](int64_t p) {
    const int64_t m0 = p * mr;
    const int64_t h = M - m0 < mr ? M - m0 : mr;
    float* dst = out + m0 * rows;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = source ? source[r] : r;
      for (int64_t i = 0; i < h; ++i) dst[r * h + i] = k >= 0 ? x[(m0 + i) * K + k] : 0.0f;
    }
  });
}

void gather_columns(const float* x, int64_t M, int64_t K, int64_t rows, const int32_t* source, float* out) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = source ? source[r] : r;
      out[m * rows + r] = k >= 0 ? x[m * K + k] : 0.0f;
    }
}

void group_sums(const float* xg, int64_t M, int64_t ldx, const int64_t* group_words, int64_t groups, int fields,
                float factor, float* sums) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < groups; ++g) {
      double s = 0.0;
      for (int64_t r = group_words[g] * fields; r < group_words[g + 1] * fields; ++r) s += xg[m * ldx + r];
      sums[m * groups + g] = static_cast<float>(s * factor);
    }
}

}  // namespace qlm
