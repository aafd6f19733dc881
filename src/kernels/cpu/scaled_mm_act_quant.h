// Activation quantizers of the scaled-mm kernels (FORMATS.md §6, vLLM scaled_fp8_quant /
// scaled_int8_quant). Every CPU kernel (the cpu_ref oracle included) quantizes through these
// functions, so all kernels see bit-identical activation codes; the kernels differ only in how they
// accumulate. Scales are dequantization multipliers: x ≈ (q - zp) * scale.
//
//   FP8 dynamic per-token:  s = max(absmax / 448, 1 / (448 * 512)),  q = e4m3(clamp(x * (1/s)))
//   FP8 dynamic per-tensor: s = absmax / 448                          (absmax over all of x)
//   FP8 per-token-group:    s = max(absmax_g, 1e-10) / 448            (groups aligned to weight k-blocks)
//   FP8 static:             s = input_scale
//   INT8 dynamic symmetric: s = absmax / 127, q = rne(x * (127 / absmax))
//   INT8 dynamic asymmetric (per token): s = (max - min) / 255, zp = rne(-128 - min / s)
//   INT8 static:            q = clamp(rne(x * (1/s)) + zp, -128, 127)
// A scale of 0 (an all-zero row) quantizes to zero codes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/scaled_mm.h"

namespace qlm {

struct ActScales {
  int64_t groups = 1;          // scales per row (DynamicTokenGroup: ceil((K + phase) / group))
  std::vector<float> scale;    // [M * groups]
  std::vector<int32_t> zero;   // [M], INT8 only (zeros when symmetric)
};

// INT8 codes into q (row stride ldq >= K; columns [K, ldq) are left untouched).
ActScales quantize_acts_int8(const ScaledMMConfig& c, const ScaledMMWeights& w, const float* x, int64_t M,
                             int8_t* q, int64_t ldq, ThreadPool* pool);
// FP8 codes as their exact f32 values into q (row stride ldq). `phase` aligns per-token groups to
// the weight's k-blocks: local column k is in group (k + phase) / act_group.
ActScales quantize_acts_fp8(const ScaledMMConfig& c, const ScaledMMWeights& w, const float* x, int64_t M,
                            float* q, int64_t ldq, ThreadPool* pool);

}  // namespace qlm
