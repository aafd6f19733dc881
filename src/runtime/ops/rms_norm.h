// RMSNorm as in Llama / Mistral / Qwen: y = x / sqrt(mean(x²) + eps) · weight, row by row.
#pragma once

#include <cstdint>

namespace qlm::ops {

// x and y are [rows, dim] with row strides x_stride / y_stride (y may alias x). The mean of
// squares is accumulated in double. Large batches are spread over the compute pool.
void rms_norm(const float* x, int64_t x_stride, const float* weight, float* y, int64_t y_stride, int64_t rows,
              int64_t dim, float eps);

}  // namespace qlm::ops
