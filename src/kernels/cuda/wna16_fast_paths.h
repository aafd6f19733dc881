// The run-time rule of `cuda_wna16_fast`: which of its three paths runs a call with M tokens.
// Plain C++ (built without CUDA too, so tests and tools can name the paths everywhere).
//   gemv   — the split-K register-prefetch kernel (wna16_fast_kernels.cu), small M;
//   tiled  — the cp.async-pipelined tiled tensor-core GEMM (wna16_tiled_kernels.cu);
//   cublas — weights dequantized into a scratch matrix, then cuBLAS (large M).
#pragma once

#include <cstdint>

namespace qlm {

enum class Wna16FastPath { Auto = 0, Gemv = 1, Tiled = 2, Cublas = 3 };

// The path the rule picks for M tokens (never Auto). Defaults: gemv for M <= kWna16FastGemvMaxM,
// cuBLAS for M >= kWna16FastCublasMinM, tiled between; the environment variables
// QLM_W4FAST_GEMV_MAX_M and QLM_W4FAST_CUBLAS_MIN_M override the bounds, QLM_W4FAST_PATH
// (gemv / tiled / cublas) forces one path. See docs/w4a16-kernel-notes.md for the measurements.
Wna16FastPath wna16_fast_path_for(int64_t M);
// Process-wide override for tests (Auto: back to the rule).
void set_wna16_fast_path(Wna16FastPath path);

}  // namespace qlm
