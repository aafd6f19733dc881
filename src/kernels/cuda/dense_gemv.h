// A GEMV for unquantized linear layers at a few rows (`cuda_cublas_dense` runs it where dense_gemv_wanted says so):
// y[m, n] = sum_k x[m, k] · w[n, k] (+ bias[n]) with x, w, y in one float type (FloatType of act_quant.h) and F32
// sums. One warp per output column n serves every row; its lanes stride over k in 16-byte vectors (elements where
// rows are not whole, aligned vectors) with the whole row's loads in flight, and the lanes' sums are added in a fixed
// tree, so every run gives the same bits. Made for the layers cuBLAS leaves on a few multiprocessors at one token:
// thin ones such as MoE routers (N = 8-128 experts; a 2-block cuBLAS kernel of 5 µs in the Qwen3-30B-A3B decode step,
// H100). Plain declarations (C++17): included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

inline constexpr int64_t kDenseGemvMaxRows = 4;

struct DenseGemvArgs {
  const void* x = nullptr;      // [M, K]
  const void* w = nullptr;      // [N, K]
  const float* bias = nullptr;  // [N] or null
  void* y = nullptr;            // [M, N]
  int type = 0;                 // FloatType of x, w and y
  int64_t M = 0, K = 0, N = 0;  // 1 <= M <= kDenseGemvMaxRows
};

cudaError_t launch_dense_gemv(const DenseGemvArgs& args, cudaStream_t stream);

// Whether `cuda_cublas_dense` runs the GEMV for M rows of a layer of N columns: QLM_DENSE_GEMV=1 (or
// set_dense_gemv(1)) at M <= kDenseGemvMaxRows, 0 never; by default on layers of at most kDenseGemvDefaultMaxN
// columns where kDenseGemvByDefault is set. Off: on the H100 (session 45, docs/perf-data/dense_gemv_h100_s45.jsonl)
// it beat cuBLAS only on a 2048 x 128 router at one row (3.5 against 4.9 µs) and lost on 4096 x 8 (7.2 / 5.2) and
// every larger layer, the more so with more rows.
inline constexpr bool kDenseGemvByDefault = false;
inline constexpr int64_t kDenseGemvDefaultMaxN = 1024;
bool dense_gemv_wanted(int64_t M, int64_t N);
// Process-wide override for tests (1 wherever M fits, 0 never, -1: QLM_DENSE_GEMV or the default).
void set_dense_gemv(int mode);

}  // namespace qlm::cuda
