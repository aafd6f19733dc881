// Activation quantizers of the CUDA scaled-mm kernels: the GPU twins of
// kernels/cpu/scaled_mm_act_quant.h, producing bit-identical codes and scales for the same F32
// input (same formulas, same IEEE operations in the same order, no FMA contraction, the same
// round-half-even and saturation rules). F16/BF16 inputs are widened to F32 exactly first.
// Plain declarations (C++17, no qlm headers): included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

// Element type codes of float buffers handed to the kernels of this directory.
enum FloatType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

enum ActQuantMode : int { kStaticTensor = 0, kDynamicTensor = 1, kDynamicToken = 2, kDynamicTokenGroup = 3 };

struct ActQuantArgs {
  const void* x = nullptr;  // [M, K] contiguous, x_type
  int x_type = kF32;
  int64_t M = 0, K = 0;
  int mode = kDynamicToken;
  bool fp8 = false;       // e4m3 codes (else int8)
  bool symmetric = true;  // int8 only: false gives per-token / static zero points
  int64_t group = 0;      // kDynamicTokenGroup: columns per scale
  int64_t phase = 0;      // kDynamicTokenGroup: local column k is in group (k + phase) / group
  int64_t groups = 1;     // scales per row
  float static_scale = 0;
  int32_t static_zero = 0;
  float* scratch = nullptr;  // kDynamicTensor: one device float (the tensor absmax)
  void* codes = nullptr;     // [M, K] int8 or e4m3 bytes
  float* scales = nullptr;   // [M * groups]
  int32_t* zeros = nullptr;  // [M] (int8); may be null for fp8
};

cudaError_t launch_act_quant(const ActQuantArgs& args, cudaStream_t stream);

}  // namespace qlm::cuda
