#include "quant/compressed_tensors/ct_config.h"

#include <algorithm>
#include <cctype>

#include "quant/compressed_tensors/ct_wna16_method.h"
#include "quant/kv_cache/kv_cache_method.h"
#include "quant/unquantized.h"

namespace qlm {
namespace {

constexpr const char* kKnownFormats[] = {
    "dense",           "sparse-bitmask",       "sparse-24-bitmask",   "int-quantized",
    "float-quantized", "naive-quantized",      "pack-quantized",      "marlin-24",
    "mixed-precision", "nvfp4-pack-quantized", "mxfp4-pack-quantized"};

[[noreturn]] void unsupported(const io::JsonView& where, const std::string& what) {
  fail("config.unsupported_scheme", {.file = where.source(), .tensor = {}, .layer = {}},
       "qlm loads compressed-tensors pack-quantized WNA16 (int4/int8 weights), float-quantized FP8 W8A8/W8A16, "
       "int-/naive-quantized INT8 W8A8 and nvfp4-/mxfp4-pack-quantized float4 weight-only (NVFP4A16, MXFP4A16) "
       "checkpoints; other schemes are not implemented yet",
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
  if (auto kv = cfg.opt_object("kv_cache_scheme")) {
    // vLLM CompressedTensorsKVCacheMethod: fp8 (float, 8 bits), per tensor or per head, symmetric.
    const ct::QuantArgs a = ct::parse_quant_args(*kv);
    if (a.type != ct::QuantType::Float || a.num_bits != 8 || !a.symmetric ||
        (a.strategy != ct::Strategy::Tensor && a.strategy != ct::Strategy::AttnHead))
      unsupported(cfg, fmt::format("kv_cache_scheme {} (the KV cache takes symmetric float8 per tensor or per "
                                   "attention head)",
                                   a.describe()));
    c->kv_cache_scheme_ = true;
  }

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
    std::string fp4_why;
    if (std::optional<Fp4Scheme> fp4 = ct::fp4_weight_only_scheme(format, weights, inputs, outputs, &fp4_why)) {
      grp.weights = *weights;
      grp.scheme.fp4 = *fp4;
      grp.format = format;
      c->groups_.push_back(std::move(grp));
      continue;
    }
    if (!fp4_why.empty()) unsupported(g, fmt::format("the scheme {} ({})", scheme_desc, fp4_why));
    if (std::string known = ct::known_unsupported(format, weights, inputs); !known.empty())
      unsupported(g, fmt::format("the scheme {} ({})", scheme_desc, known));
    if (format != "pack-quantized" && ct::is_activation_format(format) && weights && !outputs) {
      std::string why;
      std::optional<W8A8Scheme> w8 = ct::w8a8_scheme(format, *weights, inputs, &why);
      if (!w8)
        unsupported(g, fmt::format("the scheme {} (no compressed-tensors compatible scheme: {})", scheme_desc, why));
      grp.weights = *weights;
      grp.scheme.w8a8 = std::move(w8);
      grp.format = format;
      c->groups_.push_back(std::move(grp));
      continue;
    }
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
    grp.format = format;
    grp.scheme.wna16 = WNA16Scheme{.bits = wa.num_bits,
                                   .symmetric = wa.symmetric,
                                   .group_size = wa.strategy == ct::Strategy::Channel ? -1 : *wa.group_size,
                                   .act_order = wa.actorder == ct::ActOrder::Group};
    c->groups_.push_back(std::move(grp));
  }
  c->ignore_ = PatternList(cfg.opt_string_list("ignore").value_or(std::vector<std::string>{}),
                           PatternSpelling::ExactOrRegex, cfg.key_path("ignore"));
  return c;
}

std::string CompressedTensorsConfig::Scheme::describe() const {
  if (fp4) return fp4->describe();
  return w8a8 ? w8a8->describe() : wna16->describe();
}

std::optional<CompressedTensorsConfig::Scheme> CompressedTensorsConfig::resolve(const std::string& module,
                                                                                LayerInfo::Kind kind) const {
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

std::optional<WNA16Scheme> CompressedTensorsConfig::scheme_for(const std::string& module, LayerInfo::Kind kind) const {
  std::optional<Scheme> s = resolve(module, kind);
  return s ? s->wna16 : std::nullopt;
}

std::optional<W8A8Scheme> CompressedTensorsConfig::w8a8_scheme_for(const std::string& module,
                                                                   LayerInfo::Kind kind) const {
  std::optional<Scheme> s = resolve(module, kind);
  return s ? s->w8a8 : std::nullopt;
}

std::unique_ptr<KVCacheMethod> CompressedTensorsConfig::get_kv_cache_method(const LayerInfo& layer,
                                                                            const QuantContext&) const {
  if (!kv_cache_scheme_ || layer.kind != LayerInfo::Kind::Attention) return nullptr;
  return std::make_unique<KVCacheQuantMethod>(layer.prefix, KVCacheDType::Fp8E4M3);
}

std::unique_ptr<LinearMethod> CompressedTensorsConfig::get_linear_method(const LayerInfo& layer,
                                                                         const QuantContext& ctx) const {
  if (layer.kind != LayerInfo::Kind::Linear && layer.kind != LayerInfo::Kind::LmHead)
    return make_unquantized_linear_method();
  std::function<std::optional<Scheme>(const std::string&)> resolve_one = [&](const std::string& n) {
    return resolve(n, layer.kind);
  };
  std::function<std::string(const std::optional<Scheme>&)> describe = [](const std::optional<Scheme>& s) {
    return s ? s->describe() : std::string("unquantized (ignored or not targeted)");
  };
  std::optional<Scheme> scheme = resolve_fused_scheme(layer, resolve_one, describe);
  if (!scheme) return make_unquantized_linear_method();
  if (scheme->fp4) return std::make_unique<Fp4LinearMethod>("compressed-tensors", *scheme->fp4);
  if (scheme->w8a8) return std::make_unique<W8A8LinearMethod>("compressed-tensors", *scheme->w8a8);
  return std::make_unique<CtWNA16LinearMethod>(*scheme->wna16);
}

std::string CompressedTensorsConfig::describe() const {
  std::string s = "compressed-tensors";
  for (const Group& g : groups_)
    s += fmt::format(" {}: {} {}", g.name, g.format, g.scheme.wna16 ? g.weights.describe() : g.scheme.describe());
  if (kv_cache_scheme_) s += " kv_cache=fp8";
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
