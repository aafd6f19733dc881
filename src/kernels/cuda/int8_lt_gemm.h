// cuBLASLt's INT8 GEMM for a scaled-mm layer, shared by cuda_scaled_mm_int8_lt and cuda_scaled_mm_int8_fast (above
// its streaming range): int32 accumulation (IMMA tensor cores), then our epilogue kernel — the zero-point
// correction through the weight column sums (sum_k (q_x - z) q_w = sum_k q_x q_w - z * sum_k q_w, exact in int64),
// the row x column scales in double and the bias: the arithmetic of cpu_ref, so F32 results match it exactly.
// Only for QLM_WITH_CUDA builds.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "kernels/cuda/dense_lt_gemm.h"
#include "kernels/cuda/scaled_mm_cuda_common.h"
#include "kernels/scaled_mm.h"

namespace qlm {

// cuBLASLt accumulates q_x * q_w in int32: |q_x|, |q_w| <= 128, so K up to this bound cannot overflow.
constexpr int64_t kInt8LtMaxK = 131072;

class Int8LtGemm {
 public:
  // `what` names the GEMM in errors.
  Int8LtGemm(const ScaledMMConfig& c, const std::string& what);

  // q: the activation codes of quantize_acts_cuda (zero points where c.act_symmetric is false); w: the layer's
  // uploaded weights (with column sums for asymmetric activations).
  void run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias) const;

 private:
  ScaledMMConfig c_;
  std::unique_ptr<cuda::LtGemm> gemm_;
};

}  // namespace qlm
