// The weight-streaming W8A8 GEMM of scaled_mm_fp8_fast_kernels.h for few tokens, shared by cuda_scaled_mm_fp8_fast
// (FP8 e4m3 codes) and cuda_scaled_mm_int8_fast (INT8 codes): the K split per M by a small cost model, the GEMM
// launch (and the split reduction), and, for dynamic per-token activations at one token (up to
// kFp8FastFusedQuantMaxTokens through the switch below), the GEMM quantizing its activations itself instead of
// after a quantizer launch (the same codes).
// Tuning switches, read at construction, named after `env_prefix` ("QLM_FP8", "QLM_INT8"): <prefix>_FAST_SPLITS=n
// forces the K split, <prefix>_FAST_PDL=0 launches without programmatic dependent launch,
// <prefix>_FUSED_QUANT_MAX_M=n sets the bound of the in-GEMM quantization (0: never; at most 4), <prefix>_FAST_FIXUP=1
// sums split-K partials in the last block of each column block instead of a reduction kernel (off by default: not
// yet measured). Only for QLM_WITH_CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/tensor.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {

class W8A8StreamGemm {
 public:
  W8A8StreamGemm(const ScaledMMConfig& c, bool int8, const std::string& env_prefix);

  // Whether run_quantizing serves M tokens (per-token dynamic scales, M within the bound).
  bool quantizes_in_gemm(int64_t M) const { return M <= fused_quant_max_m_; }
  // Launched with programmatic dependent launch (the kernel before it may be launched for it too).
  bool pdl() const { return pdl_; }

  // y = (codes of q · w) * scales (+ bias), q from a quantizer (one scale per row).
  void run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const;
  // The same from x itself, quantized per token inside the GEMM (quantizes_in_gemm(M); x 16-byte aligned).
  void run_quantizing(const CudaScaledMMWeights& w, const Tensor& x, int64_t M, Tensor& y, const Tensor* bias) const;

 private:
  std::pair<int, int64_t> plan(int64_t M, int sm_count) const;  // (splits, K slice)
  // x_fused: quantized in the GEMM, its scales written to `scales`; else `codes` and `scales` from a quantizer.
  void launch(const CudaScaledMMWeights& w, const Tensor* codes, const Tensor* x_fused, const Tensor& scales, int64_t M,
              Tensor& y, const Tensor* bias) const;

  ScaledMMConfig c_;
  bool int8_ = false;
  bool pdl_ = false;
  int force_splits_ = 0;
  int64_t fused_quant_max_m_ = 0;
  int occupancy_[4] = {1, 1, 1, 1};  // resident blocks per SM of the 8/16/32/64-token instances
  // Split-K counters, one per 128-row column block, zeroed here at load (a zeroing inside a captured CUDA graph
  // would become a memset node replayed before every call); defined only with <prefix>_FAST_FIXUP=1.
  Tensor counters_;
};

}  // namespace qlm
