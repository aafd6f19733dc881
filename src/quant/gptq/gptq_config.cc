#include "quant/gptq/gptq_config.h"

#include "quant/unquantized.h"

namespace qlm {
namespace {

constexpr const char* kBitsExpected = "one of 2, 3, 4, 8";
constexpr const char* kGroupExpected = "-1 (one group per output channel) or a positive integer";

// Reads bits/group_size/desc_act/sym from `cfg` into `s` (required or as overrides), validating
// values; desc_act is meaningless with one group and forced off (vLLM does the same).
void read_scheme(const io::JsonView& cfg, WNA16Scheme& s, bool required) {
  auto int_field = [&](const char* key) { return required ? std::optional(cfg.get_int(key)) : cfg.opt_int(key); };
  auto bool_field = [&](const char* key) { return required ? std::optional(cfg.get_bool(key)) : cfg.opt_bool(key); };
  if (auto bits = int_field("bits")) {
    if (*bits != 2 && *bits != 3 && *bits != 4 && *bits != 8) cfg.fail_value("bits", kBitsExpected);
    s.bits = static_cast<int>(*bits);
  }
  if (auto group = int_field("group_size")) {
    if (*group != -1 && *group <= 0) cfg.fail_value("group_size", kGroupExpected);
    s.group_size = *group;
  }
  if (auto desc_act = bool_field("desc_act")) s.act_order = *desc_act;
  if (auto sym = bool_field("sym")) s.symmetric = *sym;
  if (s.group_size == -1) s.act_order = false;
}

GptqZeroConvention read_convention(const io::JsonView& cfg) {
  std::optional<std::string> value;
  const char* key = nullptr;
  for (const char* k : {"checkpoint_format", "format"}) {
    auto v = cfg.opt_string(k);
    if (!v) continue;
    if (value && *value != *v)
      fail("config.value", {.file = cfg.source(), .tensor = {}, .layer = {}}, "remove one of the two keys or make them agree",
           "{} says '{}' but {} says '{}'", cfg.key_path(key), *value, cfg.key_path(k), *v);
    value = v;
    key = k;
  }
  if (!value || *value == "gptq") return GptqZeroConvention::V1;
  if (*value == "gptq_v2") return GptqZeroConvention::V2;
  if (*value == "marlin")
    cfg.fail_value(key, "gptq or gptq_v2",
                   "Marlin-serialized GPTQ checkpoints are not supported yet; export with format gptq or gptq_v2");
  cfg.fail_value(key, "gptq or gptq_v2");
}

// modules_in_block_to_quantize: a list of names or a list of lists of names (flattened).
std::vector<std::string> read_block_modules(const io::JsonView& cfg) {
  const char* key = "modules_in_block_to_quantize";
  const nlohmann::json& v = cfg.at(key);
  if (!v.is_array()) cfg.fail_value(key, "a list of module names or a list of lists of module names");
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (item.is_string()) {
      out.push_back(item.get<std::string>());
      continue;
    }
    if (!item.is_array()) cfg.fail_value(key, "a list of module names or a list of lists of module names");
    for (const auto& name : item) {
      if (!name.is_string()) cfg.fail_value(key, "a list of module names or a list of lists of module names");
      out.push_back(name.get<std::string>());
    }
  }
  return out;
}

std::string describe_scheme(const std::optional<WNA16Scheme>& s) { return s ? s->describe() : "unquantized"; }

}  // namespace

std::unique_ptr<GptqConfig> GptqConfig::from_json(const io::JsonView& cfg) {
  auto c = std::make_unique<GptqConfig>();
  read_scheme(cfg, c->base_, /*required=*/true);
  c->convention_ = read_convention(cfg);
  c->lm_head_ = cfg.opt_bool("lm_head").value_or(false);
  if (auto dyn = cfg.opt_object("dynamic")) {
    std::vector<std::string> patterns;
    for (const std::string& key : dyn->keys()) {
      DynamicRule rule{.skip = false, .scheme = c->base_};
      std::string pattern = key;
      if (key.starts_with("-:")) {
        rule.skip = true;
        pattern = key.substr(2);
      } else if (key.starts_with("+:")) {
        pattern = key.substr(2);
      }
      io::JsonView overrides = dyn->get_object(key);
      if (!rule.skip) {
        overrides.reject_unknown_keys({"bits", "group_size", "desc_act", "sym", "damp_percent", "true_sequential",
                                       "static_groups", "mse"});
        read_scheme(overrides, rule.scheme, /*required=*/false);
      }
      patterns.push_back(std::move(pattern));
      c->rules_.push_back(rule);
    }
    c->dynamic_ = PatternList(std::move(patterns), PatternSpelling::RegexPrefix, cfg.key_path("dynamic"));
  }
  if (cfg.has("modules_in_block_to_quantize") && !cfg.is_null("modules_in_block_to_quantize"))
    c->modules_in_block_ = PatternList(read_block_modules(cfg), PatternSpelling::Substring,
                                       cfg.key_path("modules_in_block_to_quantize"));
  return c;
}

std::optional<WNA16Scheme> GptqConfig::scheme_for(const std::string& module, LayerInfo::Kind kind) const {
  if (kind == LayerInfo::Kind::Linear && modules_in_block_ && !modules_in_block_->matches(module)) return std::nullopt;
  // Python applies the first matching key in document order, which a parsed JSON object no longer
  // has; when several keys match, they must therefore agree.
  const std::vector<size_t> hits = dynamic_.all_matches(module);
  if (hits.empty()) return base_;
  const DynamicRule& first = rules_[hits.front()];
  for (size_t i : hits)
    if (rules_[i].skip != first.skip || (!first.skip && !(rules_[i].scheme == first.scheme)))
      fail("config.dynamic_ambiguous", {.file = {}, .tensor = {}, .layer = module},
           "make the dynamic patterns disjoint, or give overlapping patterns the same overrides",
           "module {} matches dynamic patterns '{}' and '{}', which disagree ({} vs {}); their order cannot be "
           "relied on",
           module, dynamic_.patterns()[hits.front()], dynamic_.patterns()[i],
           first.skip ? "skip" : first.scheme.describe(), rules_[i].skip ? "skip" : rules_[i].scheme.describe());
  if (first.skip) return std::nullopt;
  return first.scheme;
}

std::unique_ptr<LinearMethod> GptqConfig::get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const {
  if (layer.kind != LayerInfo::Kind::Linear && layer.kind != LayerInfo::Kind::LmHead)
    return make_unquantized_linear_method();
  if (layer.kind == LayerInfo::Kind::LmHead && !lm_head_) return make_unquantized_linear_method();
  std::function<std::optional<WNA16Scheme>(const std::string&)> resolve = [&](const std::string& n) {
    return scheme_for(n, layer.kind);
  };
  std::function<std::string(const std::optional<WNA16Scheme>&)> describe = describe_scheme;
  std::optional<WNA16Scheme> scheme = resolve_fused_scheme(layer, resolve, describe);
  if (!scheme) return make_unquantized_linear_method();
  return std::make_unique<GptqLinearMethod>(*scheme, convention_);
}

std::string GptqConfig::describe() const {
  std::string s = fmt::format("gptq {}-bit {} {} desc_act={} {}", base_.bits,
                              base_.group_size < 0 ? "channelwise" : fmt::format("g{}", base_.group_size),
                              base_.symmetric ? "sym" : "asym", base_.act_order,
                              convention_ == GptqZeroConvention::V1 ? "v1" : "v2");
  if (lm_head_) s += " lm_head";
  if (!rules_.empty()) s += fmt::format(" dynamic={}", rules_.size());
  return s;
}

std::vector<std::string> GptqConfig::unmatched_ignore_patterns() const {
  std::vector<std::string> out = dynamic_.unmatched();
  if (modules_in_block_)
    for (auto& p : modules_in_block_->unmatched()) out.push_back(std::move(p));
  return out;
}

namespace {
const QuantFormatRegistrar kGptqRegistrar{QuantFormat{
    .name = "gptq",
    .aliases = {"gptq_marlin", "auto_gptq"},
    .family = "gptq",
    .config_filenames = {"quantize_config.json"},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return GptqConfig::from_json(cfg);
    },
}};
}  // namespace

}  // namespace qlm
