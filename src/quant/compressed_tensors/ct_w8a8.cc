#include "quant/compressed_tensors/ct_w8a8.h"

namespace qlm::ct {

bool is_activation_format(const std::string& format) {
  return format == "naive-quantized" || format == "int-quantized" || format == "float-quantized" ||
         format == "nvfp4-pack-quantized";
}

std::string known_unsupported(const std::string& format, const std::optional<QuantArgs>& w,
                              const std::optional<QuantArgs>& in) {
  if (!w) return "";
  const bool float4 = w->type == QuantType::Float && w->num_bits == 4;
  if (float4 && in)
    return w->group_size == 16 ? "NVFP4 W4A4 (float4 weights and activations; NVFP4A16 weight-only loads)"
                               : "MXFP4 W4A4 (float4 weights and activations; MXFP4A16 weight-only loads)";
  if (w->type == QuantType::Float && w->num_bits == 8 && w->group_size == 32) return "MXFP8 (float8 weights, group 32)";
  if (format == "nvfp4-pack-quantized" || format == "mxfp4-pack-quantized") return format;
  if (w->type == QuantType::Int && w->num_bits == 4 && in && in->num_bits == 8)
    return in->type == QuantType::Float ? "W4A8-FP8 (int4 weights, fp8 activations)"
                                        : "W4A8 int (int4 weights, int8 activations)";
  if (format == "marlin-24" || format == "sparse-24-bitmask") return "Sparse24 (2:4 sparsity)";
  return "";
}

std::optional<Fp4Scheme> fp4_weight_only_scheme(const std::string& format, const std::optional<QuantArgs>& w,
                                                const std::optional<QuantArgs>& in, const std::optional<QuantArgs>& out,
                                                std::string* why) {
  if (!w || w->type != QuantType::Float || w->num_bits != 4 || in) return std::nullopt;
  auto no = [&](const std::string& reason) -> std::optional<Fp4Scheme> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (out) return no("output activations are not quantized by any float4 scheme");
  if (!w->symmetric) return no("float4 weights are symmetric (no zero point)");
  if (w->dynamic != Dynamic::Static) return no("float4 weights must be statically quantized");
  if (w->actorder != ActOrder::None) return no("float4 weights take no actorder");
  const std::string sd = w->scale_dtype.value_or("");
  if (format == "nvfp4-pack-quantized") {
    if (w->strategy != Strategy::TensorGroup || w->group_size != 16)
      return no("NVFP4 weights are strategy tensor_group with group_size 16");
    if (!sd.empty() && sd != "torch.float8_e4m3fn") return no("NVFP4 block scales are float8_e4m3fn, not " + sd);
    return Fp4Scheme{.kind = Fp4Kind::Nvfp4, .group_size = 16};
  }
  if (format == "mxfp4-pack-quantized") {
    if (w->strategy != Strategy::Group || w->group_size != 32)
      return no("MXFP4 weights are strategy group with group_size 32");
    if (!sd.empty() && sd != "torch.uint8") return no("MXFP4 block scales are uint8 (e8m0) exponents, not " + sd);
    return Fp4Scheme{.kind = Fp4Kind::Mxfp4, .group_size = 32};
  }
  return no("float4 weights are stored as nvfp4-pack-quantized or mxfp4-pack-quantized, not '" + format + "'");
}

std::optional<W8A8Scheme> w8a8_scheme(const std::string& format, const QuantArgs& w,
                                      const std::optional<QuantArgs>& in, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<W8A8Scheme> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!is_activation_format(format)) return no("format '" + format + "' carries no 8-bit weights");
  if (w.num_bits != 8) return no(fmt::format("weights have {} bits, not 8", w.num_bits));
  if (w.dynamic != Dynamic::Static) return no("weights must be statically quantized");
  if (!w.symmetric) return no("weights must be symmetric (no weight zero point)");
  W8A8Scheme s;
  switch (w.strategy) {
    case Strategy::Tensor: s.weight_scale = WeightScaleKind::Tensor; break;
    case Strategy::Channel: s.weight_scale = WeightScaleKind::Channel; break;
    case Strategy::Block:
      if (w.type == QuantType::Int) return no("int8 weights take tensor or channel scales, not blocks");
      s.weight_scale = WeightScaleKind::Block;
      s.block_n = w.block_structure->first;
      s.block_k = w.block_structure->second;
      break;
    case Strategy::Group:
    case Strategy::Token:
    case Strategy::TensorGroup:
    case Strategy::AttnHead:
      return no(fmt::format("weight strategy '{}' is not tensor, channel or block", strategy_name(w.strategy)));
  }
  s.weight_type = w.type == QuantType::Int ? W8Type::Int8 : W8Type::Fp8E4M3;
  if (!in) {
    if (w.type == QuantType::Int) return no("int8 weight-only layers are pack-quantized WNA16, not " + format);
    s.act = ActScheme::None;  // FP8 W8A16
    s.fused = FusedTensorScale::Channelwise;
    return s;
  }
  const QuantArgs& a = *in;
  if (a.num_bits != 8 || a.type != w.type)
    return no(fmt::format("input activations {} do not match {} weights", a.describe(), w.describe()));
  if (a.dynamic == Dynamic::Static) {
    if (a.strategy != Strategy::Tensor) return no("static input activations must be per tensor");
    if (w.type == QuantType::Float && !a.symmetric) return no("static fp8 input activations must be symmetric");
    s.act = ActScheme::StaticTensor;
  } else if (a.dynamic == Dynamic::Dynamic) {
    switch (a.strategy) {
      case Strategy::Token: s.act = ActScheme::DynamicToken; break;
      case Strategy::Tensor:
        if (w.type == QuantType::Int) return no("dynamic int8 input activations must be per token");
        s.act = ActScheme::DynamicTensor;
        break;
      case Strategy::Group:
        if (w.type == QuantType::Int || s.weight_scale != WeightScaleKind::Block || a.group_size != s.block_k)
          return no("per-group dynamic input activations go with fp8 block weights of the same block_k");
        s.act = ActScheme::DynamicTokenGroup;
        break;
      case Strategy::Channel:
      case Strategy::Block:
      case Strategy::TensorGroup:
      case Strategy::AttnHead:
        return no(fmt::format("dynamic input strategy '{}' is not token, tensor or group", strategy_name(a.strategy)));
    }
    if (w.type == QuantType::Float && !a.symmetric) return no("fp8 input activations must be symmetric");
  } else {
    return no("input activations with dynamic \"local\" are not supported");
  }
  s.act_symmetric = a.symmetric;
  s.fused = w.type == QuantType::Int ? FusedTensorScale::Channelwise : FusedTensorScale::RequantizeToMax;
  return s;
}

}  // namespace qlm::ct
