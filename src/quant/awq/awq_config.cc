#include "quant/awq/awq_config.h"

#include <algorithm>
#include <cctype>

#include "quant/unquantized.h"

namespace qlm {
namespace {

// The first of `keys` present in `cfg` (AutoAWQ and transformers spell some fields differently).
const char* first_key(const io::JsonView& cfg, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (cfg.has(k)) return k;
  return *keys.begin();  // absent: get_* reports the canonical spelling as missing
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::unique_ptr<AwqConfig> AwqConfig::from_json(const io::JsonView& cfg) {
  auto c = std::make_unique<AwqConfig>();
  const char* bits_key = first_key(cfg, {"bits", "w_bit"});
  const int64_t bits = cfg.get_int(bits_key);
  if (bits != 4)
    cfg.fail_value(bits_key, "4", bits == 8 ? "8-bit AWQ checkpoints are not supported yet (AutoAWQ writes 4-bit only)"
                                            : "AWQ GEMM checkpoints are 4-bit");
  const char* group_key = first_key(cfg, {"group_size", "q_group_size"});
  const int64_t group = cfg.get_int(group_key);
  if (group != -1 && group <= 0) cfg.fail_value(group_key, "-1 or a positive integer");
  if (!cfg.get_bool("zero_point"))
    cfg.fail_value("zero_point", "true",
                   "AWQ checkpoints without zero points (zero_point=false) are not supported yet");
  if (auto version = cfg.opt_string("version"); version && lower(*version) != "gemm")
    cfg.fail_value("version", "gemm",
                   fmt::format("AWQ '{}' checkpoints use another weight layout that is not supported yet; use an AWQ "
                               "GEMM checkpoint",
                               *version));
  c->scheme_ = WNA16Scheme{.bits = 4, .symmetric = false, .group_size = group, .act_order = false};
  c->lm_head_ = cfg.opt_bool("lm_head").value_or(false);
  c->not_convert_ = PatternList(cfg.opt_string_list("modules_to_not_convert").value_or(std::vector<std::string>{}),
                                PatternSpelling::Substring, cfg.key_path("modules_to_not_convert"));
  return c;
}

std::unique_ptr<LinearMethod> AwqConfig::get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const {
  if (layer.kind != LayerInfo::Kind::Linear && layer.kind != LayerInfo::Kind::LmHead)
    return make_unquantized_linear_method();
  if (layer.kind == LayerInfo::Kind::LmHead && !lm_head_) return make_unquantized_linear_method();
  std::function<bool(const std::string&)> quantized = [&](const std::string& n) { return !not_convert_.matches(n); };
  std::function<std::string(const bool&)> describe = [&](const bool& q) {
    return q ? scheme_.describe() : std::string("unquantized (modules_to_not_convert)");
  };
  if (!resolve_fused_scheme(layer, quantized, describe)) return make_unquantized_linear_method();
  return std::make_unique<AwqLinearMethod>(scheme_);
}

std::string AwqConfig::describe() const {
  return fmt::format("awq 4-bit {} zero_point gemm{}",
                     scheme_.group_size < 0 ? "channelwise" : fmt::format("g{}", scheme_.group_size),
                     not_convert_.empty() ? "" : fmt::format(" skip={}", not_convert_.size()));
}

namespace {
const QuantFormatRegistrar kAwqRegistrar{QuantFormat{
    .name = "awq",
    .aliases = {"awq_marlin"},
    .family = "awq",
    .config_filenames = {"quant_config.json", "quantize_config.json"},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return AwqConfig::from_json(cfg);
    },
}};
}  // namespace

}  // namespace qlm
