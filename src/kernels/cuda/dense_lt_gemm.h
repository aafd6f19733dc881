// One cuBLASLt GEMM of a linear layer, shared by the dense and scaled-mm CUDA kernels:
// row-major y[M, N] = x[M, K] · W[N, K]ᵀ. cuBLASLt is column-major, and a row-major matrix is
// its transpose in column-major: W is read as a K×N matrix (ld K) with op(A) = T, x as a K×M
// matrix (ld K) with op(B) = N, and D = op(A)·B is N×M column-major (ld N), which is y row-major.
// This "TN" form is also the one cuBLASLt requires for FP8 and INT8 (IMMA) GEMMs.
// Plans (descriptors + the heuristic's algorithm, or the fastest of its candidates when the GEMM
// tunes) are cached per M; every GEMM runs on the device context's stream with its cuBLASLt
// workspace. Only for QLM_WITH_CUDA builds.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "cuda/context.h"

namespace qlm::cuda {

struct LtGemmSpec {
  cudaDataType_t a_type = CUDA_R_32F;  // weights
  cudaDataType_t b_type = CUDA_R_32F;  // activations
  cudaDataType_t d_type = CUDA_R_32F;  // output (C has the same type; beta = 0)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;  // alpha / beta: CUDA_R_32F, or CUDA_R_32I for INT8
  int64_t N = 0, K = 0;
  // FP8: a_scale / b_scale are vectors (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS >= 12.9):
  // a_scale[N] per weight row, b_scale[M] per token; D[n, m] is scaled by a_scale[n] * b_scale[m].
  bool outer_vec_scales = false;
  // Time the heuristic's candidate algorithms on the first eager call per M and keep the fastest
  // (kernels/cuda/lt_algo_tuner.h; QLM_LT_AUTOTUNE overrides this default either way).
  bool autotune = false;
  std::string what;  // names the GEMM in errors ("bf16 dense", "fp8 scaled-mm")
};

class LtGemm {
 public:
  LtGemm(int device, LtGemmSpec spec);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Enqueues the GEMM on the context stream. a_scale / b_scale: device F32 per-tensor scales of
  // the weights / activations (FP8 only), or null. bias: device F32 [N] or null; returns true
  // when cuBLASLt applied it in its epilogue, false when the caller must add it.
  bool run(const void* w, const void* x, void* y, int64_t M, const float* bias, const float* a_scale,
           const float* b_scale) const;
  // Whether cuBLASLt has an algorithm for M rows with these operands (builds and caches the plan;
  // run() with the same arguments then cannot fail for want of one).
  bool supported(int64_t M, const float* bias, const float* a_scale, const float* b_scale) const;

 private:
  struct Plan;
  // Null when cuBLASLt has no algorithm.
  Plan* plan(int64_t M, const float* bias, const float* a_scale, const float* b_scale) const;
  std::unique_ptr<Plan> make_plan(int64_t M, const float* bias, const float* a_scale, const float* b_scale) const;
  // Picks the plan's algorithm among its candidates by timing them on these operands (or takes a
  // choice already made for the same signature); no-op while the stream is being captured.
  void tune(Plan& p, const void* w, const void* x, void* y, int64_t M, const float* a_scale,
            const float* b_scale) const;
  // Enqueues the GEMM with algorithm `algo`.
  cublasStatus_t launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* w, const void* x, void* y) const;

  Context* ctx_;
  LtGemmSpec spec_;
  bool autotune_ = false;
  mutable std::mutex mutex_;
  // Key: M, bias requested, A scale, B scale. A null plan: no algorithm.
  mutable std::map<std::tuple<int64_t, bool, bool, bool>, std::unique_ptr<Plan>> plans_;
};

}  // namespace qlm::cuda
