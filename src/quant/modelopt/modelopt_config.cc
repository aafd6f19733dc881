#include "quant/modelopt/modelopt_config.h"

#include <algorithm>
#include <cctype>

#include "quant/kv_cache/kv_cache_method.h"
#include "quant/unquantized.h"

namespace qlm {
namespace {

constexpr const char* kSupported = "FP8 (per-tensor fp8 weights, static per-tensor fp8 activations)";

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

ErrorContext in(const io::JsonView& v) { return {.file = v.source(), .tensor = {}, .layer = {}}; }

// The object holding the fields: hf_quant_config.json nests them under "quantization".
io::JsonView fields_of(const io::JsonView& cfg) {
  if (auto nested = cfg.opt_object("quantization")) return *nested;
  return cfg;
}

// "FP8" or nullopt (no quantized KV cache). kv_cache_scheme (config.json) is a compressed-tensors
// style dict: float with 8 bits means FP8.
std::optional<std::string> kv_algo(const io::JsonView& q) {
  if (auto algo = q.opt_string("kv_cache_quant_algo")) return upper(*algo);
  if (auto scheme = q.opt_object("kv_cache_scheme")) {
    const std::optional<std::string> type = scheme->opt_string("type");
    const std::optional<int64_t> bits = scheme->opt_int("num_bits");
    if (type == "float" && bits == 8) return std::string("FP8");
    fail("config.unsupported_scheme", in(q), "use an FP8 KV cache scheme ({\"type\": \"float\", \"num_bits\": 8})",
         "{}: a KV cache of type {} with {} bits is not supported yet; supported: float 8-bit (FP8)",
         q.key_path("kv_cache_scheme"), type.value_or("(unset)"), bits ? std::to_string(*bits) : "(unset)");
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<ModelOptConfig> ModelOptConfig::from_json(const io::JsonView& cfg) {
  auto c = std::make_unique<ModelOptConfig>();
  const io::JsonView q = fields_of(cfg);
  if (!q.has("quant_algo"))
    fail("config.missing_key", in(q),
         fmt::format("add \"quant_algo\" (supported: {}); ModelOpt cannot quantize a float checkpoint at load time",
                     kSupported),
         "{}: the ModelOpt config has no quant_algo", q.key_path("quant_algo"));
  c->quant_algo_ = upper(q.get_string("quant_algo"));
  if (c->quant_algo_ != "FP8")
    fail("config.unsupported_scheme", in(q), fmt::format("qlm serves ModelOpt quant_algo {}", kSupported),
         "{} = \"{}\" is not supported yet; supported: FP8", q.key_path("quant_algo"), c->quant_algo_);

  if (const std::optional<std::string> kv = kv_algo(q)) {
    if (*kv != "FP8")
      fail("config.unsupported_scheme", in(q), "use kv_cache_quant_algo \"FP8\" or null",
           "{} = \"{}\" is not supported yet; supported: FP8 or null (no quantized KV cache)",
           q.key_path("kv_cache_quant_algo"), *kv);
    c->kv_fp8_ = true;
  }

  // The legacy file says exclude_modules, config.json says ignore; both are wildcard patterns
  // matched against checkpoint module names.
  const char* key = q.has("exclude_modules") ? "exclude_modules" : "ignore";
  c->excluded_ = PatternList(q.opt_string_list(key).value_or(std::vector<std::string>{}), PatternSpelling::Wildcard,
                             q.key_path(key));

  W8A8Scheme& s = c->scheme_;
  s.weight_type = W8Type::Fp8E4M3;
  s.weight_scale = WeightScaleKind::Tensor;
  s.act = ActScheme::StaticTensor;
  s.fused = FusedTensorScale::RequantizeToMax;
  return c;
}

std::unique_ptr<LinearMethod> ModelOptConfig::get_linear_method(const LayerInfo& layer, const QuantContext&) const {
  // lm_head stays unquantized, as in vLLM (it is an embedding-like layer there, outside the config).
  if (layer.kind != LayerInfo::Kind::Linear) return make_unquantized_linear_method();
  std::function<bool(const std::string&)> excluded = [&](const std::string& n) { return excluded_.matches(n); };
  std::function<std::string(const bool&)> describe = [](const bool& skip) {
    return std::string(skip ? "unquantized (exclude_modules)" : "modelopt fp8");
  };
  if (resolve_fused_scheme(layer, excluded, describe)) return make_unquantized_linear_method();
  return std::make_unique<W8A8LinearMethod>("modelopt", scheme_);
}

std::unique_ptr<KVCacheMethod> ModelOptConfig::get_kv_cache_method(const LayerInfo& layer, const QuantContext&) const {
  if (!kv_fp8_ || layer.kind != LayerInfo::Kind::Attention) return nullptr;
  return std::make_unique<KVCacheQuantMethod>(layer.prefix, KVCacheDType::Fp8E4M3);
}

std::string ModelOptConfig::describe() const {
  std::string s = "modelopt FP8 per-tensor static";
  if (kv_fp8_) s += " kv_cache=FP8";
  if (!excluded_.empty()) s += fmt::format(" exclude_modules={}", excluded_.size());
  return s;
}

namespace {
const QuantFormatRegistrar kModelOptRegistrar{QuantFormat{
    .name = "modelopt",
    // config.json spellings of ModelOpt's other algorithms: they resolve here so that the error
    // names the quant_algo instead of an unknown method.
    .aliases = {"modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed"},
    .family = "modelopt",
    .config_filenames = {"hf_quant_config.json"},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return ModelOptConfig::from_json(cfg);
    },
}};
}  // namespace

}  // namespace qlm
