// The CUTLASS sm_90a W8A8 GEMM (fp8_cutlass_gemm.h) as one path of a scaled-mm kernel, shared by
// cuda_scaled_mm_fp8_fast and cuda_scaled_mm_int8_fast for M beyond their streaming GEMM: whether it runs at all
// (compiled in, compute capability exactly 9.0 since sm_90a code runs nowhere else, BF16 / F16 output), the tile
// configuration per M (fp8_cutlass_config_for, or forced), and the launch with the weight and token scales and the
// bias in its epilogue.
// Tuning switches, read at construction, named after `env_prefix` ("QLM_FP8", "QLM_INT8"):
// <prefix>_CUTLASS_CONFIG=<name> forces one configuration for every M it is asked about, =off leaves every M to the
// caller's other path; QLM_FP8_PROMOTION=n (FP8 only) promotes the accumulators every n wgmma k-steps, a multiple
// of 4. Only for QLM_WITH_CUDA.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "kernels/cuda/fp8_cutlass_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {

class W8A8CutlassPath {
 public:
  // row_scales: F32 [N_p] weight scales, one per output row (weight_row_scales); kept as a handle on the same storage.
  // pdl: launch for programmatic dependent launch (its set-up overlaps the quantizer's tail).
  // row_scales may be left undefined where runs_on(c) is false (the path never runs there).
  W8A8CutlassPath(const ScaledMMConfig& c, bool int8, const std::string& env_prefix, Tensor row_scales, bool pdl);

  // Whether the CUTLASS GEMM can run layer `c` at all: compiled in, compute capability exactly 9.0 (sm_90a code runs
  // nowhere else), BF16 / F16 output.
  static bool runs_on(const ScaledMMConfig& c);

  // "cutlass <config>" (FP8: "cutlass <config> p<interval>") where this path takes M tokens, else nullopt.
  std::optional<std::string> path(int64_t M) const;
  // Runs y = (q · w) * scales (+ bias) when this path takes M; false, having done nothing, otherwise (the caller's
  // other path runs). Throws on a CUDA error.
  bool run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const;

 private:
  std::optional<cuda::Fp8CutlassChoice> choice(int64_t M) const;

  ScaledMMConfig c_;
  bool int8_ = false;
  bool enabled_ = false;
  bool pdl_ = false;
  Tensor row_scales_;
  std::optional<cuda::Fp8CutlassConfig> forced_config_;  // <prefix>_CUTLASS_CONFIG (tuning, tests)
  std::optional<int> forced_promotion_;                  // QLM_FP8_PROMOTION (tuning, tests)
};

}  // namespace qlm
