#include "kernels/scaled_mm.h"

#include <fmt/format.h>

namespace qlm {

const char* w8_type_name(W8Type t) {
  switch (t) {
    case W8Type::Int8: return "int8";
    case W8Type::Fp8E4M3: return "fp8_e4m3";
  }
  return "?";
}

const char* weight_scale_kind_name(WeightScaleKind k) {
  switch (k) {
    case WeightScaleKind::Tensor: return "tensor";
    case WeightScaleKind::Channel: return "channel";
    case WeightScaleKind::Block: return "block";
  }
  return "?";
}

const char* act_scheme_name(ActScheme a) {
  switch (a) {
    case ActScheme::None: return "none";
    case ActScheme::StaticTensor: return "static_tensor";
    case ActScheme::DynamicTensor: return "dynamic_tensor";
    case ActScheme::DynamicToken: return "dynamic_token";
    case ActScheme::DynamicTokenGroup: return "dynamic_token_group";
  }
  return "?";
}

std::string ScaledMMConfig::describe() const {
  std::string w = weight_scale_kind_name(weight_scale);
  if (weight_scale == WeightScaleKind::Block) w += fmt::format("({}x{})", block_n, block_k);
  std::string a = act_scheme_name(act);
  if (act == ActScheme::DynamicTokenGroup) a += fmt::format("({})", act_group);
  return fmt::format("{} w={} act={}{} K_p={} N_p={} act_dtype={}", w8_type_name(weight_type), w, a,
                     act_symmetric ? "" : " asym", K_p, N_p, dtype_name(act_dtype));
}

std::optional<std::string> scaled_mm_common_reason(const ScaledMMConfig& c) {
  if (c.act_dtype != DType::F32 && c.act_dtype != DType::F16 && c.act_dtype != DType::BF16)
    return fmt::format("activation dtype {} is not F32, F16 or BF16", dtype_name(c.act_dtype));
  if (c.weight_scale == WeightScaleKind::Block && (c.block_n <= 0 || c.block_k <= 0))
    return std::string("block scales need positive block sizes");
  if (c.act == ActScheme::DynamicTokenGroup && c.act_group <= 0)
    return std::string("per-token-group activations need a positive group size");
  return std::nullopt;
}

void check_scaled_mm_weights(const ScaledMMConfig& c, const ScaledMMWeights& w) {
  QLM_CHECK(w.K == c.K_p && w.N == c.N_p);
  QLM_CHECK(w.codes.shape() == Shape({w.N, w.K}) && w.codes.is_contiguous());
  QLM_CHECK(w.codes.dtype() == (c.weight_type == W8Type::Int8 ? DType::I8 : DType::F8_E4M3));
  QLM_CHECK(w.weight_scale.dtype() == DType::F32 && w.weight_scale.is_contiguous());
  switch (c.weight_scale) {
    case WeightScaleKind::Tensor: QLM_CHECK(w.weight_scale.numel() == 1); break;
    case WeightScaleKind::Channel: QLM_CHECK(w.weight_scale.shape() == Shape({w.N})); break;
    case WeightScaleKind::Block:
      QLM_CHECK(w.block_k == c.block_k && w.k_phase >= 0 && w.k_phase < w.block_k);
      QLM_CHECK(w.weight_scale.shape() == Shape({w.N, (w.K + w.k_phase + w.block_k - 1) / w.block_k}));
      break;
  }
}

}  // namespace qlm
