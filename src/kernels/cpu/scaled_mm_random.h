// Random scaled-mm layers for benchmarks: `qlm bench-linear --format fp8|int8` and
// bench/scaled_mm_bench.cc. fp8: per-tensor weight scale, dynamic per-token fp8 activations;
// int8: per-channel weight scales, dynamic per-token int8 activations (the online / W8A8 defaults).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/scaled_mm.h"

namespace qlm {

// format "fp8" or "int8".
ScaledMMConfig bench_scaled_mm_config(const std::string& format, int64_t K, int64_t N);
ScaledMMWeights random_scaled_mm_weights(const ScaledMMConfig& c, uint64_t seed);

}  // namespace qlm
