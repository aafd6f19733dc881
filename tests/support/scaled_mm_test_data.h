// Random weights and activations shared by the scaled-mm (W8A8 / W8A16) CUDA kernel tests
// (tests/cuda/scaled_mm_cuda_test.cc, tests/cuda/scaled_mm_fp8_fast_cuda_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/scaled_mm.h"

namespace qlm::testing {

struct ScaledMMWeightSpec {
  W8Type type = W8Type::Fp8E4M3;
  WeightScaleKind ws = WeightScaleKind::Tensor;
  bool sym = true;      // symmetric activations (asymmetric ones get input zero point 7)
  int64_t block = 128;  // block scales: block_k (and block_n)
  int64_t phase = 0;    // block scales: k_phase
};

// Weights [N, K]: e4m3 codes of uniform values in [-300, 300] or uniform int8 bytes; a tensor scale
// of 0.0123, or channel / block scales in [0.001, 0.011); input scale 1/32.
ScaledMMWeights random_scaled_mm_weights(const ScaledMMWeightSpec& s, int64_t N, int64_t K, uint64_t seed);

// A deep copy (kernels take their weights by value and may keep the tensors).
ScaledMMWeights clone_weights(const ScaledMMWeights& w);

// Activations [M, K] uniform in [-3, 3), rounded to `act` (returned as the F32 values every side
// sees); with M > 2, row 1 all zero (scale floor) and row 2 tiny values (FP8 subnormals).
std::vector<float> scaled_mm_test_acts(int64_t M, int64_t K, DType act, uint64_t seed);

}  // namespace qlm::testing
