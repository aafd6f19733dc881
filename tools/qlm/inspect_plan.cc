#include "tools/qlm/inspect_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace qlm::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson layer_json(const runtime::LayerPlan& l) {
  OrderedJson rejected = OrderedJson::array();
  for (const auto& [kernel, reason] : l.rejected) rejected.push_back({{"kernel", kernel}, {"reason", reason}});
  OrderedJson j = {{"layer", l.layer}, {"format", l.format}, {"method", l.method}, {"kernel", l.kernel},
                   {"K_p", l.K_p},     {"N_p", l.N_p},       {"rejected", std::move(rejected)}};
  if (!l.paths.empty()) j["paths"] = l.paths;  // kernels whose code path depends on the token count
  return j;
}

OrderedJson moe_json(const runtime::MoEPlan& m) {
  OrderedJson rejected = OrderedJson::array();
  for (const auto& [kernel, reason] : m.rejected) rejected.push_back({{"kernel", kernel}, {"reason", reason}});
  return {{"layer", m.layer},
          {"method", m.method},
          {"kernel", m.kernel},
          {"experts", m.experts},
          {"top_k", m.top_k},
          {"hidden", m.hidden},
          {"intermediate_p", m.intermediate_p},
          {"rejected", std::move(rejected)}};
}

OrderedJson rank_json(int rank, const runtime::LoadPlan& plan) {
  OrderedJson layers = OrderedJson::array();
  for (const runtime::LayerPlan& l : plan.layers) layers.push_back(layer_json(l));
  OrderedJson moe = OrderedJson::array();
  for (const runtime::MoEPlan& m : plan.moe) moe.push_back(moe_json(m));
  OrderedJson summary = OrderedJson::array();
  for (const runtime::LoadPlan::Group& g : plan.groups())
    summary.push_back({{"method", g.method}, {"kernel", g.kernel}, {"count", g.count}});
  return {{"rank", rank}, {"layers", std::move(layers)}, {"moe", std::move(moe)}, {"summary", std::move(summary)}};
}

// "  model.layers.0.mlp  [8 experts, top-2, 4096 → 14336]  <method>  → cuda_grouped"
void render_moe(std::string& out, const OrderedJson& m, size_t width) {
  out += fmt::format("  {:<{}}  [{} experts, top-{}, {} → {}]  {}  → {}\n", m["layer"].get<std::string>(), width,
                     m["experts"].get<int64_t>(), m["top_k"].get<int64_t>(), m["hidden"].get<int64_t>(),
                     m["intermediate_p"].get<int64_t>(), m["method"].get<std::string>(), m["kernel"].get<std::string>());
  for (const OrderedJson& r : m["rejected"])
    out += fmt::format("      rejected {}: {}\n", r["kernel"].get<std::string>(), r["reason"].get<std::string>());
}

void render_layer(std::string& out, const OrderedJson& l, size_t width) {
  out += fmt::format("  {:<{}}  [{} → {}]  {}  → {}\n", l["layer"].get<std::string>(), width, l["K_p"].get<int64_t>(),
                     l["N_p"].get<int64_t>(), l["method"].get<std::string>(), l["kernel"].get<std::string>());
  if (l.contains("paths")) out += fmt::format("      paths: {}\n", l["paths"].get<std::string>());
  for (const OrderedJson& r : l["rejected"])
    out += fmt::format("      rejected {}: {}\n", r["kernel"].get<std::string>(), r["reason"].get<std::string>());
}

}  // namespace

OrderedJson plan_json(const std::string& model_dir, const runtime::ModelPlan& plan) {
  OrderedJson j = OrderedJson::object();
  j["model_dir"] = model_dir;
  j["architecture"] = plan.architecture;
  j["device"] = plan.device;
  j["capability"] = plan.capability;
  j["act_dtype"] = plan.act_dtype;
  j["tp"] = plan.tp;
  j["linear_backend"] = plan.linear_backend;
  j["quantization"] = plan.quantization;
  OrderedJson ranks = OrderedJson::array();
  for (size_t r = 0; r < plan.ranks.size(); ++r) ranks.push_back(rank_json(static_cast<int>(r), plan.ranks[r]));
  j["ranks"] = std::move(ranks);
  j["notes"] = plan.notes;
  int64_t layers = 0, unquantized = 0;
  if (!plan.ranks.empty())
    for (const runtime::LayerPlan& l : plan.ranks.front().layers) {
      ++layers;
      if (l.format == "unquantized") ++unquantized;
    }
  j["totals"] = {{"layers", layers}, {"quantized", layers - unquantized}, {"unquantized", unquantized}};
  return j;
}

std::string render_plan_text(const OrderedJson& plan) {
  std::string out = fmt::format("plan: {} on {}", plan["architecture"].get<std::string>(),
                                plan["device"].get<std::string>());
  if (plan["capability"].get<int>() > 0) out += fmt::format(" (capability {})", plan["capability"].get<int>());
  out += fmt::format(", activations {}, tp {}, --linear-backend {}\n", plan["act_dtype"].get<std::string>(),
                     plan["tp"].get<int>(), plan["linear_backend"].get<std::string>());
  out += fmt::format("quantization: {}\n", plan["quantization"].get<std::string>());
  const OrderedJson& ranks = plan["ranks"];
  for (size_t r = 0; r < ranks.size(); ++r) {
    const OrderedJson& layers = ranks[r]["layers"];
    if (r > 0 && layers == ranks[0]["layers"] && ranks[r]["moe"] == ranks[0]["moe"]) {
      out += fmt::format("rank {}: same methods and kernels as rank 0\n", r);
      continue;
    }
    out += fmt::format("rank {}: layer  [K_p → N_p]  method  → kernel\n", r);
    size_t width = 0;
    for (const OrderedJson& l : layers) width = std::max(width, l["layer"].get<std::string>().size());
    for (const OrderedJson& l : layers) render_layer(out, l, width);
    const OrderedJson& moe = ranks[r]["moe"];
    if (!moe.empty()) {
      out += fmt::format("rank {} mixture-of-experts: layer  [experts, top-k, H → I per rank]  method  → MoE kernel\n", r);
      width = 0;
      for (const OrderedJson& m : moe) width = std::max(width, m["layer"].get<std::string>().size());
      for (const OrderedJson& m : moe) render_moe(out, m, width);
    }
  }
  out += "summary:\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (r > 0 && ranks[r]["summary"] == ranks[0]["summary"]) continue;
    for (const OrderedJson& g : ranks[r]["summary"])
      out += fmt::format("  {}{} → {} ×{}\n", ranks.size() > 1 ? fmt::format("rank {}: ", r) : "",
                         g["method"].get<std::string>(), g["kernel"].get<std::string>(), g["count"].get<int>());
  }
  const OrderedJson& t = plan["totals"];
  out += fmt::format("  {} linear layers per rank: {} quantized, {} unquantized\n", t["layers"].get<int64_t>(),
                     t["quantized"].get<int64_t>(), t["unquantized"].get<int64_t>());
  for (const OrderedJson& n : plan["notes"]) out += fmt::format("note: {}\n", n.get<std::string>());
  return out;
}

}  // namespace qlm::cli
