// Random weights for benchmarks and `qlm bench-linear`: valid standard-form WNA16 weights (every
// random bit pattern of qweight is a valid code stream) and dense float weights.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/wna16_weights.h"

namespace qlm {

struct RandomWna16Options {
  int bits = 4;
  int64_t K = 0, N = 0;
  int64_t group_size = 128;  // -1: channelwise
  bool zero_points = false;  // uint<bits> with zeros; else uint<bits>b<2^(bits-1)>
  bool act_order = false;    // random g_idx, every group group_size times
  uint64_t seed = 1;
};

WNA16Weights random_wna16_weights(const RandomWna16Options& options);

// [rows, cols] uniform in [-1, 1), converted to `dtype` (F32, BF16 or F16).
Tensor random_float_tensor(int64_t rows, int64_t cols, DType dtype, uint64_t seed);

}  // namespace qlm
