#include "quant/fp8/fp8_config.h"

#include "quant/kv_cache/kv_cache_method.h"
#include "quant/unquantized.h"

namespace qlm {

bool is_online_request(const io::JsonView& cfg) { return cfg.source() == "--quantization"; }

std::unique_ptr<Fp8Config> Fp8Config::from_json(const io::JsonView& cfg) {
  auto c = std::make_unique<Fp8Config>();
  W8A8Scheme& s = c->scheme_;
  s.weight_type = W8Type::Fp8E4M3;
  s.fused = FusedTensorScale::RequantizeToMax;
  if (is_online_request(cfg)) {
    // vLLM Fp8OnlineLinearMethod: per-tensor weights quantized at load, dynamic per-token activations.
    c->serialized_ = false;
    s.online = OnlineQuant::Fp8PerTensor;
    s.weight_scale = WeightScaleKind::Tensor;
    s.act = ActScheme::DynamicToken;
    return c;
  }
  const std::string scheme = cfg.get_string("activation_scheme");
  if (scheme != "static" && scheme != "dynamic")
    cfg.fail_value("activation_scheme", "\"static\" or \"dynamic\"",
                   "set activation_scheme to the scheme the checkpoint was exported with");
  c->static_acts_ = scheme == "static";
  std::vector<std::string> ignored = cfg.opt_string_list("ignored_layers").value_or(std::vector<std::string>{});
  if (ignored.empty()) ignored = cfg.opt_string_list("modules_to_not_convert").value_or(std::vector<std::string>{});
  c->ignored_ = PatternList(std::move(ignored), PatternSpelling::Exact,
                            cfg.has("ignored_layers") ? cfg.key_path("ignored_layers")
                                                      : cfg.key_path("modules_to_not_convert"));
  if (cfg.has("weight_block_size") && !cfg.is_null("weight_block_size")) {
    if (!cfg.at("weight_block_size").is_array())
      cfg.fail_value("weight_block_size", "a list of two positive integers [block_n, block_k]");
    const std::vector<int64_t> b = cfg.get_int_list("weight_block_size");
    if (b.size() != 2 || b[0] <= 0 || b[1] <= 0)
      cfg.fail_value("weight_block_size", "a list of two positive integers [block_n, block_k]",
                     fmt::format("weight_block_size has {} entries; block-wise fp8 takes exactly 2", b.size()));
    if (c->static_acts_)
      fail("config.fp8_block_static", {.file = cfg.source(), .tensor = {}, .layer = {}},
           "block-wise fp8 quantizes activations per token group at run time: set activation_scheme to \"dynamic\"",
           "{} = [{}, {}] with {} = \"static\": block-wise fp8 supports only dynamic activation scales",
           cfg.key_path("weight_block_size"), b[0], b[1], cfg.key_path("activation_scheme"));
    c->block_ = std::pair{b[0], b[1]};
  }
  if (c->block_) {
    s.weight_scale = WeightScaleKind::Block;
    s.block_n = c->block_->first;
    s.block_k = c->block_->second;
    s.block_scale_name = "weight_scale_inv";
    s.act = ActScheme::DynamicTokenGroup;
  } else {
    s.weight_scale = WeightScaleKind::Tensor;
    s.act = c->static_acts_ ? ActScheme::StaticTensor : ActScheme::DynamicToken;
  }
  return c;
}

std::unique_ptr<KVCacheMethod> Fp8Config::get_kv_cache_method(const LayerInfo& layer, const QuantContext&) const {
  if (!serialized_ || layer.kind != LayerInfo::Kind::Attention) return nullptr;
  return std::make_unique<KVCacheQuantMethod>(layer.prefix, KVCacheDType::Fp8E4M3);
}

std::unique_ptr<LinearMethod> Fp8Config::get_linear_method(const LayerInfo& layer, const QuantContext&) const {
  if (layer.kind != LayerInfo::Kind::Linear) return make_unquantized_linear_method();
  std::function<bool(const std::string&)> skipped = [&](const std::string& n) { return ignored_.matches(n); };
  std::function<std::string(const bool&)> describe = [](const bool& skip) {
    return std::string(skip ? "unquantized (ignored_layers)" : "fp8");
  };
  if (resolve_fused_scheme(layer, skipped, describe)) return make_unquantized_linear_method();
  return std::make_unique<W8A8LinearMethod>("fp8", scheme_);
}

std::string Fp8Config::describe() const {
  if (!serialized_) return "fp8 online per-tensor (weights quantized at load, dynamic per-token activations)";
  std::string s = block_ ? fmt::format("fp8 block {}x{} dynamic", block_->first, block_->second)
                         : fmt::format("fp8 per-tensor {}", static_acts_ ? "static" : "dynamic");
  if (!ignored_.empty()) s += fmt::format(" ignored_layers={}", ignored_.size());
  return s;
}

namespace {
const QuantFormatRegistrar kFp8Registrar{QuantFormat{
    .name = "fp8",
    .aliases = {},
    .family = "fp8",
    .config_filenames = {},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return Fp8Config::from_json(cfg);
    },
}};
}  // namespace

}  // namespace qlm
