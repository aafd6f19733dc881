#include "kernels/cuda/scaled_mm_cuda_common.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

namespace qlm {

std::optional<std::string> cuda_scaled_mm_base_reason(const ScaledMMConfig& c, int min_capability,
                                                        const char* why_capability) {
  if (c.device.type != DeviceType::CUDA) return std::string("runs on CUDA devices only");
  if (c.capability < min_capability)
    return fmt::format("needs compute capability >= {} ({}); the device has {}", min_capability, why_capability,
                       c.capability);
  if (auto r = scaled_mm_common_reason(c)) return r;
  if (c.weight_type == W8Type::Int8 && c.weight_scale == WeightScaleKind::Block)
    return std::string("INT8 weights take tensor or channel scales, not blocks");
  if (c.weight_type == W8Type::Int8 && c.act == ActScheme::DynamicTokenGroup)
    return std::string("INT8 activations are quantized per tensor or per token, not per group");
  if (c.weight_type == W8Type::Fp8E4M3 && !c.act_symmetric) return std::string("FP8 activations are symmetric");
  if (c.K_p <= 0 || c.N_p <= 0) return fmt::format("empty layer (K_p={}, N_p={})", c.K_p, c.N_p);
  return std::nullopt;
}

}  // namespace qlm

#ifdef QLM_WITH_CUDA
#include "core/error.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"

namespace qlm {

size_t CudaScaledMMWeights::bytes() const {
  return codes.nbytes() + scales.nbytes() + (col_sums.defined() ? col_sums.nbytes() : 0);
}

CudaScaledMMWeights upload_scaled_mm_weights(const ScaledMMConfig& c, const ScaledMMWeights& w) {
  check_scaled_mm_weights(c, w);
  QLM_CHECK(w.codes.on_host() && w.weight_scale.on_host());
  CudaScaledMMWeights d;
  d.codes = w.codes.to_device(c.device);
  d.scales = w.weight_scale.to_device(c.device);
  if (c.weight_scale == WeightScaleKind::Block) {
    d.scale_cols = w.weight_scale.size(1);
    d.block_k = w.block_k;
    d.k_phase = w.k_phase;
  }
  d.input_scale = w.input_scale;
  d.input_zero_point = w.input_zero_point;
  if (c.weight_type == W8Type::Int8 && !c.act_symmetric) {
    std::vector<int32_t> sums(static_cast<size_t>(w.N), 0);
    const int8_t* q = w.codes.data<int8_t>();
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k) sums[static_cast<size_t>(n)] += q[n * w.K + k];
    d.col_sums = Tensor::from_vector(sums, {w.N}).to_device(c.device);
  }
  return d;
}

Tensor weight_row_scales(const ScaledMMConfig& c, const ScaledMMWeights& host, const CudaScaledMMWeights& w) {
  if (c.weight_scale != WeightScaleKind::Tensor) return w.scales;
  return Tensor::from_vector(std::vector<float>(static_cast<size_t>(c.N_p), host.weight_scale.data<float>()[0]),
                             {c.N_p})
      .to_device(c.device);
}

int cuda_float_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return cuda::kF32;
    case DType::F16: return cuda::kF16;
    case DType::BF16: return cuda::kBF16;
    default: break;
  }
  fail("kernel.args", {}, "", "CUDA linear kernels take F32, F16 or BF16 activations, got {}", dtype_name(dtype));
}

CudaActCodes quantize_acts_cuda(const ScaledMMConfig& c, float input_scale, int32_t input_zero_point,
                                int64_t k_phase, const Tensor& x) {
  QLM_CHECK(c.act != ActScheme::None);
  QLM_CHECK(!x.on_host() && x.is_contiguous() && x.dtype() == c.act_dtype && x.size(x.dim() - 1) == c.K_p);
  const int64_t K = c.K_p, M = x.numel() / K;
  const bool fp8 = c.weight_type == W8Type::Fp8E4M3;
  CudaActCodes out;
  if (c.act == ActScheme::DynamicTokenGroup) {
    out.group = c.act_group;
    out.phase = k_phase % c.act_group;
    out.groups = (K + out.phase + c.act_group - 1) / c.act_group;
  } else {
    out.group = K;  // (k + 0) / K == 0 for every k < K
  }
  const Device dev = x.device();
  out.codes = Tensor::empty({M, K}, fp8 ? DType::F8_E4M3 : DType::I8, dev);
  out.scales = Tensor::empty({M * out.groups}, DType::F32, dev);
  out.zeros = Tensor::empty({M}, DType::I32, dev);
  Tensor scratch;
  cuda::ActQuantArgs a;
  a.x = x.raw_data();
  a.x_type = cuda_float_type(x.dtype());
  a.M = M;
  a.K = K;
  switch (c.act) {
    case ActScheme::StaticTensor: a.mode = cuda::kStaticTensor; break;
    case ActScheme::DynamicTensor:
      a.mode = cuda::kDynamicTensor;
      scratch = Tensor::empty({1}, DType::F32, dev);
      a.scratch = scratch.data<float>();
      break;
    case ActScheme::DynamicToken: a.mode = cuda::kDynamicToken; break;
    case ActScheme::DynamicTokenGroup: a.mode = cuda::kDynamicTokenGroup; break;
    case ActScheme::None: break;
  }
  a.fp8 = fp8;
  a.symmetric = c.act_symmetric;
  a.group = out.group;
  a.phase = out.phase;
  a.groups = out.groups;
  a.static_scale = input_scale;
  a.static_zero = input_zero_point;
  a.codes = out.codes.raw_data();
  a.scales = out.scales.data<float>();
  a.zeros = out.zeros.data<int32_t>();
  QLM_CUDA_CHECK(cuda::launch_act_quant(a, cuda::context(dev.index).stream));
  return out;
}

CudaActCodes quantize_acts_per_token_cuda(const ScaledMMConfig& c, const Tensor& x, bool pdl) {
  QLM_CHECK(c.act == ActScheme::DynamicToken && c.act_symmetric);
  QLM_CHECK(!x.on_host() && x.is_contiguous() && x.dtype() == c.act_dtype && x.size(x.dim() - 1) == c.K_p);
  // The vectorised kernels load 16 bytes at a time: a view that starts elsewhere takes the general quantizer.
  if (reinterpret_cast<uintptr_t>(x.raw_data()) % 16 != 0 || c.K_p % 8 != 0) return quantize_acts_cuda(c, 0, 0, 0, x);
  const int64_t M = x.numel() / c.K_p;
  const bool int8 = c.weight_type == W8Type::Int8;
  CudaActCodes q;
  q.group = c.K_p;
  q.codes = Tensor::empty({M, c.K_p}, int8 ? DType::I8 : DType::F8_E4M3, x.device());
  q.scales = Tensor::empty({M}, DType::F32, x.device());
  QLM_CUDA_CHECK(cuda::launch_w8a8_quant_token(x.raw_data(), cuda_float_type(c.act_dtype), M, c.K_p, int8,
                                               q.codes.raw_data(), q.scales.data<float>(), pdl,
                                               cuda::context(x.device().index).stream));
  return q;
}

}  // namespace qlm
#endif
