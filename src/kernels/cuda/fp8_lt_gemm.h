// cuBLASLt's FP8 e4m3 GEMM for a scaled-mm layer, shared by cuda_scaled_mm_fp8_lt and
// cuda_scaled_mm_fp8_fast (above its streaming range): y = (x_q · w_qᵀ) * s_x[m] * s_w[n] + bias,
// y in the activation dtype. Per-token x per-channel scales go to cuBLASLt as outer vectors
// (s_w expanded to one per row when the weight scale is per tensor); where cuBLASLt has no
// outer-vector algorithm for a shape, or outer vectors are off, the GEMM writes F32 and our
// epilogue kernel applies the scales and the bias. Only for QLM_WITH_CUDA builds.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {

// The cuBLASLt spec of an FP8 e4m3 GEMM of layer `c` writing y in the activation dtype (F32
// accumulation, scalar scales unless outer_vec_scales is set).
cuda::LtGemmSpec fp8_lt_spec(const ScaledMMConfig& c, const std::string& what);

// Runs `gemm` (y in the activation dtype, scales applied by cuBLASLt) and adds the bias with our
// epilogue kernel, in place, when cuBLASLt did not take it.
void run_lt_gemm_with_bias(const cuda::LtGemm& gemm, const ScaledMMConfig& c, const CudaScaledMMWeights& w,
                           const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias, const float* a_scale,
                           const float* b_scale);

class Fp8OuterVecLtGemm {
 public:
  // `host` holds the layer's weight scale (its value is expanded for per-tensor scales);
  // `outer_vec` false takes the F32 + epilogue path always. `what` names the GEMM in errors.
  Fp8OuterVecLtGemm(const ScaledMMConfig& c, const ScaledMMWeights& host, const CudaScaledMMWeights& w, bool outer_vec,
                    const std::string& what);

  // q: per-token activation codes and scales (one per row); w: the weights it was built for.
  void run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const;

  // F32 [N] weight scales, one per output row (also for per-tensor weight scales).
  const Tensor& row_scales() const { return row_scales_; }
  // Device bytes this adds to the layer's weights (the expanded per-tensor scale).
  size_t extra_bytes() const { return c_.weight_scale == WeightScaleKind::Tensor ? row_scales_.nbytes() : 0; }

 private:
  ScaledMMConfig c_;
  Tensor row_scales_;
  std::unique_ptr<cuda::LtGemm> gemm_;      // outer-vector scales, y in the activation dtype (or null)
  std::unique_ptr<cuda::LtGemm> gemm_f32_;  // F32 output for our epilogue
};

}  // namespace qlm
