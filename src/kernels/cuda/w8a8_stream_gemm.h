// The weight-streaming W8A8 GEMM of scaled_mm_fp8_fast_kernels.h for few tokens, shared by cuda_scaled_mm_fp8_fast
// (FP8 e4m3 codes) and cuda_scaled_mm_int8_fast (INT8 codes): the K split per M by a small cost model, the GEMM
// launch (and the split reduction), and, for dynamic per-token activations at one token (up to
// kFp8FastFusedQuantMaxTokens through the switch below), the GEMM quantizing its activations itself instead of
// after a quantizer launch (the same codes).
// Tuning switches, read at construction, named after `env_prefix` ("QLM_FP8", "QLM_INT8"): <prefix>_FAST_MAX_M=n sets
// the tokens up to which the streaming GEMM serves a call (the kernel's default above; larger M is the caller's other
// path), <prefix>_FAST_SPLITS=n forces the K split, <prefix>_FAST_PDL=0 launches without programmatic dependent launch,
// <prefix>_FUSED_QUANT_MAX_M=n sets the bound of the in-GEMM quantization (0: never; at most 4). Only for
// QLM_WITH_CUDA.
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
  // default_max_m: tokens up to which the streaming GEMM serves a call unless <prefix>_FAST_MAX_M says otherwise.
  W8A8StreamGemm(const ScaledMMConfig& c, bool int8, const std::string& env_prefix, int64_t default_max_m);

  // Whether M tokens are this GEMM's (otherwise the caller's large-M path).
  bool serves(int64_t M) const { return M <= max_m_; }
  // Whether try_run_quantizing serves M tokens whose activations are 16-byte aligned (per-token dynamic scales, M
  // within both bounds).
  bool quantizes_in_gemm(int64_t M) const { return serves(M) && M <= fused_quant_max_m_; }
  // "streaming, quantizing in the GEMM", "streaming", or empty where M is not served.
  std::string path(int64_t M) const;
  // Launched with programmatic dependent launch (the kernel before it may be launched for it too).
  bool pdl() const { return pdl_; }

  // y = (codes of q · w) * scales (+ bias), q from a quantizer (one scale per row); serves(M).
  void run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const;
  // The same from x itself, quantized per token inside the GEMM, when quantizes_in_gemm(M) and x is 16-byte aligned
  // (its 16-byte loads; a quantizer needs the same, so a misaligned view never gets this far in practice). False,
  // having done nothing, otherwise: the caller quantizes and calls run.
  bool try_run_quantizing(const CudaScaledMMWeights& w, const Tensor& x, int64_t M, Tensor& y,
                          const Tensor* bias) const;

 private:
  std::pair<int, int64_t> plan(int64_t M, int sm_count) const;  // (splits, K slice)
  // x_fused: quantized in the GEMM, its scales written to `scales`; else `codes` and `scales` from a quantizer.
  void launch(const CudaScaledMMWeights& w, const Tensor* codes, const Tensor* x_fused, const Tensor& scales, int64_t M,
              Tensor& y, const Tensor* bias) const;

  ScaledMMConfig c_;
  bool int8_ = false;
  bool pdl_ = false;
  int force_splits_ = 0;
  int64_t max_m_ = 0;
  int64_t fused_quant_max_m_ = 0;
  // The per-token scales a quantizing GEMM writes (block (0, 0)) for its split reduction: kFp8FastFusedQuantMaxTokens
  // floats, allocated at load where the GEMM quantizes at all. Calls on one stream are ordered, so one buffer serves.
  Tensor scales_out_;
  int occupancy_[4] = {1, 1, 1, 1};  // resident blocks per SM of the 8/16/32/64-token instances
};

}  // namespace qlm
