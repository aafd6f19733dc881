#include "quant/online/offline_quantize.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "quant/online/online_quantize.h"
#include "quant/w8a8_method.h"

namespace qlm {
namespace {

constexpr const char* kProjections[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// "<module>" when `name` is "<module>.weight" of a decoder projection, else empty.
std::string projection_module(const std::string& name, const Tensor& t) {
  if (!name.ends_with(".weight") || t.dim() != 2 || !dtype_info(t.dtype()).is_float || dtype_bits(t.dtype()) < 16)
    return "";
  const std::string module = name.substr(0, name.size() - 7);
  for (const char* p : kProjections)
    if (module.ends_with(std::string(".") + p)) return module;
  return "";
}

// Modules that form one fused layer share a per-tensor scale: "<block>.self_attn.qkv", "<block>.mlp.gate_up".
std::string fusion_group(const std::string& module) {
  for (const char* p : {"q_proj", "k_proj", "v_proj"})
    if (module.ends_with(std::string(".") + p)) return module.substr(0, module.size() - 6) + "qkv";
  for (const char* p : {"gate_proj", "up_proj"})
    if (module.ends_with(std::string(".") + p)) return module.substr(0, module.rfind('.') + 1) + "gate_up";
  return module;
}

nlohmann::json ct_config(bool fp8) {
  const char* type = fp8 ? "float" : "int";
  nlohmann::json w = {{"num_bits", 8}, {"type", type}, {"symmetric", true}, {"strategy", "channel"}, {"dynamic", false}};
  nlohmann::json a = {{"num_bits", 8}, {"type", type}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
  return {{"quant_method", "compressed-tensors"},
          {"format", fp8 ? "float-quantized" : "int-quantized"},
          {"quantization_status", "compressed"},
          {"ignore", {"lm_head"}},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", a}}}}}};
}

}  // namespace

QuantizeTarget parse_quantize_target(const std::string& name) {
  if (name == "fp8") return QuantizeTarget::Fp8;
  if (name == "fp8_per_channel") return QuantizeTarget::Fp8PerChannel;
  if (name == "int8") return QuantizeTarget::Int8;
  fail("cli.quantize_target", {.file = "--to", .tensor = {}, .layer = {}}, "use --to fp8, fp8_per_channel or int8",
       "unknown quantization target '{}'", name);
}

const char* quantize_target_name(QuantizeTarget t) {
  switch (t) {
    case QuantizeTarget::Fp8: return "fp8";
    case QuantizeTarget::Fp8PerChannel: return "fp8_per_channel";
    case QuantizeTarget::Int8: return "int8";
  }
  return "?";
}

const char* online_method_name(QuantizeTarget t) { return quantize_target_name(t); }

QuantizeResult quantize_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, QuantizeTarget target) {
  QuantizeResult r;
  // Per-tensor fp8: one scale per fusion group, from the largest absmax of its parts.
  std::map<std::string, float> group_absmax;
  if (target == QuantizeTarget::Fp8)
    for (const auto& [name, t] : tensors)
      if (std::string m = projection_module(name, t); !m.empty()) {
        float& a = group_absmax[fusion_group(m)];
        a = std::max(a, absmax_of(t));
      }
  for (const auto& [name, t] : tensors) {
    const std::string module = projection_module(name, t);
    if (module.empty()) {
      r.tensors.emplace_back(name, t);
      ++r.copied;
      continue;
    }
    ++r.quantized;
    switch (target) {
      case QuantizeTarget::Fp8: {
        const float s = fp8_tensor_scale(group_absmax.at(fusion_group(module)));
        r.tensors.emplace_back(name, fp8_quantize_with_scale(t, s));
        r.tensors.emplace_back(module + ".weight_scale", Tensor::from_vector(std::vector<float>{s}, Shape{}));
        break;
      }
      case QuantizeTarget::Fp8PerChannel:
      case QuantizeTarget::Int8: {
        QuantizedMatrix q = online_quantize(
            t, target == QuantizeTarget::Int8 ? OnlineQuant::Int8PerChannel : OnlineQuant::Fp8PerChannel);
        const int64_t N = q.codes.size(0);
        r.tensors.emplace_back(name, std::move(q.codes));
        r.tensors.emplace_back(module + ".weight_scale", q.scales.view({N, 1}));
        break;
      }
    }
  }
  r.quantization_config = target == QuantizeTarget::Fp8
                              ? nlohmann::json{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}
                              : ct_config(target == QuantizeTarget::Fp8PerChannel);
  return r;
}

}  // namespace qlm
