#include <fmt/format.h>

#include <map>

#include "layers/fused_moe.h"
#include "models/decoder_model.h"
#include "quant/unquantized.h"
#include "runtime/model.h"
#include "runtime/model_plan.h"

namespace qlm::runtime {

std::vector<LoadPlan::Group> LoadPlan::groups() const {
  std::vector<Group> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const LayerPlan& l : layers) {
    auto [it, fresh] = index.emplace(std::pair{l.method, l.kernel}, out.size());
    if (fresh) out.push_back({l.method, l.kernel, 0});
    ++out[it->second].count;
  }
  return out;
}

std::string LoadPlan::summary() const {
  std::string s;
  for (const Group& g : groups()) s += fmt::format("{}{} → {} ×{}", s.empty() ? "" : ", ", g.method, g.kernel, g.count);
  return s;
}

LayerPlan plan_layer(const LinearLayer& layer) {
  LayerPlan p;
  p.layer = layer.prefix();
  p.format = layer.method().name();
  if (p.format == kUnquantizedName) {
    p.method = fmt::format("unquantized {}", dtype_name(layer.spec().params_dtype));
  } else {
    // The method's description without the kernel it appends ("... [cpu_ref]").
    p.method = layer.method().describe();
    if (const size_t bracket = p.method.find(" ["); bracket != std::string::npos) p.method.resize(bracket);
  }
  p.kernel = layer.kernel_selection.chosen;
  p.rejected = layer.kernel_selection.rejected;
  p.paths = layer.kernel_selection.paths;
  p.K_p = layer.input_size_per_partition();
  p.N_p = layer.output_size_per_partition();
  return p;
}

LoadPlan build_load_plan(models::DecoderModel& rank, const QuantizationConfig* quant) {
  LoadPlan plan;
  plan.quantization = quant ? quant->describe() : "none";
  for (const auto& [prefix, layer] : rank.modules().linears())
    if (layer.get() != &rank.lm_head()) plan.layers.push_back(plan_layer(*layer));
  plan.layers.push_back(plan_layer(rank.lm_head()));  // last, also when tied (then it is not in the module set)
  for (const FusedMoE* moe : rank.moe_layers()) {
    MoEPlan m;
    m.layer = moe->prefix();
    m.kernel = moe->kernel_selection.chosen;
    // The method's description without the MoE kernel it appends ("... [cpu_grouped]").
    m.method = moe->method().describe();
    const std::string suffix = " [" + m.kernel + "]";
    if (m.method.ends_with(suffix)) m.method.resize(m.method.size() - suffix.size());
    m.rejected = moe->kernel_selection.rejected;
    m.experts = moe->spec().num_experts;
    m.top_k = moe->spec().top_k;
    m.hidden = moe->spec().hidden_size;
    m.intermediate_p = moe->intermediate_size_per_partition();
    plan.moe.push_back(std::move(m));
  }
  return plan;
}

}  // namespace qlm::runtime
