// Host-side pieces shared by the CUDA scaled-mm kernels: the weight upload of prepare(), the GPU
// activation quantizer behind a Tensor interface, and the capability / dtype rules they share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "kernels/scaled_mm.h"

namespace qlm {

// Device and common-form checks every CUDA scaled-mm kernel starts its can_implement with:
// a CUDA device of capability >= min_capability (reason names both), the standard-form rules,
// and the pairing rules of the formats (INT8: tensor/channel scales, tensor/token activations;
// FP8: symmetric activations).
std::optional<std::string> cuda_scaled_mm_base_reason(const ScaledMMConfig& c, int min_capability,
                                                        const char* why_capability);

#ifdef QLM_WITH_CUDA

// One rank's weights on the device.
struct CudaScaledMMWeights {
  Tensor codes;     // [N, K] I8 or F8_E4M3
  Tensor scales;    // F32, as ScaledMMWeights::weight_scale
  Tensor col_sums;  // I32 [N]: sum over k of the INT8 codes (asymmetric activations), else undefined
  int64_t scale_cols = 1, block_k = 1, k_phase = 0;
  float input_scale = 0;
  int32_t input_zero_point = 0;
  size_t bytes() const;
};
CudaScaledMMWeights upload_scaled_mm_weights(const ScaledMMConfig& c, const ScaledMMWeights& w);
// F32 [N_p] weight scales on the device, one per output row: w.scales itself for per-channel scales, the per-tensor
// scale of `host` repeated otherwise (the GEMMs whose epilogues take a vector).
Tensor weight_row_scales(const ScaledMMConfig& c, const ScaledMMWeights& host, const CudaScaledMMWeights& w);

// Activation codes on the device: codes [M, K] (I8 or F8_E4M3), scales F32 [M * groups] (one
// per row also for per-tensor schemes), zeros I32 [M] (INT8).
struct CudaActCodes {
  Tensor codes, scales, zeros;
  int64_t groups = 1, group = 1, phase = 0;  // code (m, k) has scale m * groups + (k + phase) / group
};
// Quantizes x [M, K_p] (device, c.act_dtype) with c.act (not None), bit-identically to
// quantize_acts_int8 / quantize_acts_fp8 on the same F32 values.
CudaActCodes quantize_acts_cuda(const ScaledMMConfig& c, float input_scale, int32_t input_zero_point,
                                int64_t k_phase, const Tensor& x);

// The same for dynamic per-token symmetric scales (c.act DynamicToken, c.act_symmetric) through the vectorised
// quantizer (launch_w8a8_quant_token; FP8 or INT8 codes by c.weight_type): the same codes and scales. x not 16-byte
// aligned (or K_p not a multiple of 8) takes quantize_acts_cuda. pdl: launched for programmatic dependent launch.
CudaActCodes quantize_acts_per_token_cuda(const ScaledMMConfig& c, const Tensor& x, bool pdl);

// FloatType code (kernels/cuda/act_quant.h) of an activation dtype.
int cuda_float_type(DType dtype);

#endif

}  // namespace qlm
