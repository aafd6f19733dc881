#include "quant/compressed_tensors/ct_config.h"

#include <algorithm>
#include <cctype>

#include "quant/compressed_tensors/ct_wna16_method.h"
#include "quant/unquantized.h"

namespace qlm {
namespace {

constexpr const char* kKnownFormats[] = {"dense",           "sparse-bitmask",   "sparse-24-bitmask",
                                         "int-quantized",   "float-quantized",  "naive-quantized",
                                         "pack-quantized",  "marlin-24",        "mixed-precision",
                                         "nvfp4-pack-quantized", "mxfp4-pack-quantized"};

[[noreturn]] void unsupported(const io::JsonView& where, const std::string& what) {
  fail("config.unsupported_scheme", {.file = where.source(), .tensor = {}, .layer = {}},
       "this version of qlm loads compressed-tensors pack-quantized WNA16 checkpoints (int4/int8 weights, group or "
       "channel scales, no activation quantization); other schemes arrive with the W8A8 work",
       "{}: {} is not supported yet", where.path().empty() ? "quantization_config" : where.path(), what);
}

// Class-name target (vLLM find_matched_target): matches a module whose class name contains it,
// case-insensitively. Our linear layers stand for torch.nn.Linear.
bool is_linear_class_target(const std::string& target) {
  if (target.empty() || target.starts_with("re:")) return false;
  std::string t = target;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::string("linear").find(t) != std::string::npos;
}

}  // namespace

std::unique_ptr<CompressedTensorsConfig> CompressedTensorsConfig::from_json(const io::JsonView& cfg) {
  auto c = std::make_unique<CompressedTensorsConfig>();
  const std::string global_format = cfg.opt_string("format").value_or("dense");
  if (std::find(std::begin(kKnownFormats), std::end(kKnownFormats), global_format) == std::end(kKnownFormats))
    cfg.fail_value("format", "a compressed-tensors compression format (pack-quantized, ...)");
  for (const char* key : {"sparsity_config", "transform_config"})
    if (auto sub = cfg.opt_object(key); sub && !sub->keys().empty()) {
      const std::string fmt_name = sub->has("format") && sub->at("format").is_string() ? sub->get_string("format") : "";
      if (!(std::string(key) == "sparsity_config" && fmt_name == "dense"))
        unsupported(cfg, fmt::format("{} ({})", key, fmt_name.empty() ? "present" : fmt_name));
    }
  if (cfg.has("kv_cache_scheme") && !cfg.is_null("kv_cache_scheme"))
    unsupported(cfg, "kv_cache_scheme (quantized KV cache)");

  const io::JsonView groups = cfg.get_object("config_groups");
  for (const std::string& gname : groups.keys()) {
    const io::JsonView g = groups.get_object(gname);
    g.reject_unknown_keys({"targets", "weights", "input_activations", "output_activations", "format"});
    Group grp;
    grp.name = gname;
    std::vector<std::string> targets = g.get_string_list("targets");
    for (const auto& t : targets) grp.class_target.push_back(is_linear_class_target(t));
    grp.targets = PatternList(std::move(targets), PatternSpelling::ExactOrRegex, g.key_path("targets"));
    const std::string format = g.opt_string("format").value_or(global_format);
    if (std::find(std::begin(kKnownFormats), std::end(kKnownFormats), format) == std::end(kKnownFormats))
      g.fail_value("format", "a compressed-tensors compression format (pack-quantized, ...)");
    std::optional<ct::QuantArgs> weights, inputs, outputs;
    if (auto w = g.opt_object("weights")) weights = ct::parse_quant_args(*w);
    if (auto a = g.opt_object("input_activations")) inputs = ct::parse_quant_args(*a);
    if (auto o = g.opt_object("output_activations")) outputs = ct::parse_quant_args(*o);
    const std::string scheme_desc =
        fmt::format("format '{}' with weights {}{}{}", format, weights ? weights->describe() : "unquantized",
                    inputs ? ", input activations " + inputs->describe() : "",
                    outputs ? ", output activations " + outputs->describe() : "");
    if (format != "pack-quantized") unsupported(g, "the scheme " + scheme_desc);
    if (!weights || inputs || outputs) unsupported(g, "the scheme " + scheme_desc + " (WNA16 quantizes weights only)");
    const ct::QuantArgs& wa = *weights;
    if (wa.type != ct::QuantType::Int || (wa.num_bits != 4 && wa.num_bits != 8))
      unsupported(g, "the scheme " + scheme_desc + " (pack-quantized WNA16 takes int weights of 4 or 8 bits)");
    if (wa.strategy != ct::Strategy::Group && wa.strategy != ct::Strategy::Channel)
      unsupported(g, "the scheme " + scheme_desc + " (WNA16 needs strategy group or channel)");
    if (wa.dynamic != ct::Dynamic::Static)
      unsupported(g, "the scheme " + scheme_desc + " (weights must be statically quantized)");
    grp.weights = wa;
    grp.scheme = WNA16Scheme{.bits = wa.num_bits,
                             .symmetric = wa.symmetric,
                             .group_size = wa.strategy == ct::Strategy::Channel ? -1 : *wa.group_size,
                             .act_order = wa.actorder == ct::ActOrder::Group};
    c->groups_.push_back(std::move(grp));
  }
  c->ignore_ = PatternList(cfg.opt_string_list("ignore").value_or(std::vector<std::string>{}),
                           PatternSpelling::ExactOrRegex, cfg.key_path("ignore"));
  return c;
}

std::optional<WNA16Scheme> CompressedTensorsConfig::scheme_for(const std::string& module, LayerInfo::Kind kind) const {
  if (ignore_.matches(module)) return std::nullopt;
  for (const Group& g : groups_)
    if (g.targets.first_match(module)) return g.scheme;
  if (kind == LayerInfo::Kind::Linear)
    for (const Group& g : groups_)
      for (bool is_class : g.class_target)
        if (is_class) {
          linear_class_used_.store(true, std::memory_order_relaxed);
          return g.scheme;
        }
  return std::nullopt;
}

std::unique_ptr<LinearMethod> CompressedTensorsConfig::get_linear_method(const LayerInfo& layer,
                                                                         const QuantContext& ctx) const {
  if (layer.kind != LayerInfo::Kind::Linear && layer.kind != LayerInfo::Kind::LmHead)
    return make_unquantized_linear_method();
  std::function<std::optional<WNA16Scheme>(const std::string&)> resolve = [&](const std::string& n) {
    return scheme_for(n, layer.kind);
  };
  std::function<std::string(const std::optional<WNA16Scheme>&)> describe = [](const std::optional<WNA16Scheme>& s) {
    return s ? s->describe() : std::string("unquantized (ignored or not targeted)");
  };
  std::optional<WNA16Scheme> scheme = resolve_fused_scheme(layer, resolve, describe);
  if (!scheme) return make_unquantized_linear_method();
  return std::make_unique<CtWNA16LinearMethod>(*scheme);
}

std::string CompressedTensorsConfig::describe() const {
  std::string s = "compressed-tensors pack-quantized";
  for (const Group& g : groups_) s += fmt::format(" {}: {}", g.name, g.weights.describe());
  if (!ignore_.empty()) s += fmt::format(" ignore={}", ignore_.size());
  return s;
}

std::vector<std::string> CompressedTensorsConfig::unmatched_ignore_patterns() const {
  std::vector<std::string> out = ignore_.unmatched();
  for (const Group& g : groups_)
    for (size_t i = 0; i < g.targets.size(); ++i) {
      const bool class_used = g.class_target[i] && linear_class_used_.load(std::memory_order_relaxed);
      if (!g.targets.used(i) && !class_used)
        out.push_back(fmt::format("{}.targets: {}", g.name, g.targets.patterns()[i]));
    }
  return out;
}

namespace {
const QuantFormatRegistrar kCompressedTensorsRegistrar{QuantFormat{
    .name = "compressed-tensors",
    .aliases = {"compressed_tensors"},
    .family = "compressed-tensors",
    .config_filenames = {},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return CompressedTensorsConfig::from_json(cfg);
    },
}};
}  // namespace

}  // namespace qlm
