// The straightforward scaled-mm GEMM of `cuda_scaled_mm_simple` (any capability >= 70): a shared-
// memory tiled kernel for every configuration. INT8 W8A8 accumulates (q_x - z_x) * q_w exactly in
// int32 and scales in double like cpu_ref; FP8 codes and float activations (W8A16) are dequantized
// into the tiles (block scales per k) and accumulated in f32. FP8 is decoded in software.
// Plain declarations (C++17): included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

enum WeightScaleCode : int { kWeightTensor = 0, kWeightChannel = 1, kWeightBlock = 2 };

struct SimpleMMArgs {
  int64_t M = 0, N = 0, K = 0;
  int act_type = 0;               // FloatType of x and y
  const void* x = nullptr;        // [M, K] float activations: read when act_codes is null (W8A16)
  const void* act_codes = nullptr;  // [M, K] int8 or e4m3 codes (quantized activations)
  const float* act_scales = nullptr;  // [M * act_groups]
  int64_t act_groups = 1, act_group = 1, act_phase = 0;  // code (m, k) uses scale (k + phase) / group
  const int32_t* act_zeros = nullptr;  // [M] INT8 zero points, or null
  const void* w_codes = nullptr;  // [N, K] int8 or e4m3
  bool fp8 = false;               // codes (weights, and activations when quantized) are e4m3
  const float* w_scales = nullptr;
  int w_scale_kind = kWeightTensor;
  int64_t w_scale_cols = 1, w_block_k = 1, w_phase = 0;  // block: scale (n, (k + phase) / block_k)
  const float* bias = nullptr;  // [N] or null
  void* y = nullptr;            // [M, N]
};

cudaError_t launch_scaled_mm_simple(const SimpleMMArgs& args, cudaStream_t stream);

}  // namespace qlm::cuda
