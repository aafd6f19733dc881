#include "runtime/ops/rms_norm.h"

#include <cmath>

#include "core/thread_pool.h"

namespace qlm::ops {

namespace {
void norm_row(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
  for (int64_t i = 0; i < dim; ++i) y[i] = weight[i] * (x[i] * inv);
}
}  // namespace

void rms_norm(const float* x, int64_t x_stride, const float* weight, float* y, int64_t y_stride, int64_t rows,
              int64_t dim, float eps) {
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) norm_row(x + r * x_stride, weight, y + r * y_stride, dim, eps);
  };
  if (rows * dim < (1 << 16)) {
    body(0, rows);
    return;
  }
  compute_pool().parallel_for(0, rows, 1, body);
}

}  // namespace qlm::ops
