#include "runtime/ops/activation.h"

#include <cmath>

namespace qlm::ops {

void silu_and_mul(const float* gate_up, float* out, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * width;
    const float* u = g + width;
    float* o = out + r * width;
    for (int64_t i = 0; i < width; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace qlm::ops
