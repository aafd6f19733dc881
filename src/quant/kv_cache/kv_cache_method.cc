#include "quant/kv_cache/kv_cache_method.h"

#include <array>
#include <cmath>

#include "core/float_convert.h"
#include "loader/module_set.h"
#include "quant/compressed_tensors/ct_config.h"
#include "quant/fp8/fp8_config.h"
#include "quant/modelopt/modelopt_config.h"

namespace qlm {
namespace {

enum class Which : uint8_t { K, V, Q, KV, Prob };

// Checkpoint spellings under the attention module (FORMATS.md §7) and the scale each one carries.
struct Spelling {
  const char* suffix;
  Which which;
};
constexpr std::array<Spelling, 22> kSpellings{{
    {"k_scale", Which::K},          {"attn.k_scale", Which::K},       {"k_proj.k_scale", Which::K},
    {"qkv_proj.k_scale", Which::K}, {"k_proj.output_scale", Which::K}, {"k_cache.scale", Which::K},
    {"v_scale", Which::V},          {"attn.v_scale", Which::V},       {"v_proj.v_scale", Which::V},
    {"qkv_proj.v_scale", Which::V}, {"v_proj.output_scale", Which::V}, {"v_cache.scale", Which::V},
    {"q_scale", Which::Q},          {"attn.q_scale", Which::Q},       {"q_proj.output_scale", Which::Q},
    {"q.scale", Which::Q},          {"kv_scale", Which::KV},          {"attn.kv_scale", Which::KV},
    {"prob_output_scale", Which::Prob}, {"attn.prob_scale", Which::Prob}, {"prob_scale", Which::Prob},
    {"qkv_proj.q_scale", Which::Q},
}};

const char* qlm_suffix(Which w) {
  switch (w) {
    case Which::K: return "attn.k_scale";
    case Which::V: return "attn.v_scale";
    case Which::Q: return "attn.q_scale";
    case Which::KV: return "attn.kv_scale";
    case Which::Prob: return "attn.prob_scale";
  }
  return "?";
}

constexpr std::string_view kAttn = "self_attn.";

}  // namespace

const char* kv_cache_dtype_name(KVCacheDType d) {
  switch (d) {
    case KVCacheDType::Auto: return "auto";
    case KVCacheDType::Fp8E4M3: return "fp8_e4m3";
    case KVCacheDType::Fp8E5M2: return "fp8_e5m2";
  }
  return "?";
}

KVCacheDType parse_kv_cache_dtype(const std::string& name) {
  if (name == "auto") return KVCacheDType::Auto;
  if (name == "fp8" || name == "fp8_e4m3") return KVCacheDType::Fp8E4M3;
  if (name == "fp8_e5m2") return KVCacheDType::Fp8E5M2;
  fail("config.kv_cache_dtype", {.file = "--kv-cache-dtype", .tensor = {}, .layer = {}},
       "use auto, fp8, fp8_e4m3 or fp8_e5m2", "unknown KV cache dtype '{}'", name);
}

void check_kv_cache_dtype(KVCacheDType d, const QuantizationConfig* config) {
  if (d != KVCacheDType::Fp8E5M2 || config == nullptr) return;
  const auto* fp8 = dynamic_cast<const Fp8Config*>(config);
  const auto* ct = dynamic_cast<const CompressedTensorsConfig*>(config);
  const auto* modelopt = dynamic_cast<const ModelOptConfig*>(config);
  if ((fp8 && fp8->serialized()) || (ct && ct->has_kv_cache_scheme()) || (modelopt && modelopt->has_kv_cache_scales()))
    fail("config.kv_cache_dtype", {.file = "--kv-cache-dtype", .tensor = {}, .layer = {}},
         "use --kv-cache-dtype fp8 (e4m3), whose scales the checkpoint was calibrated for",
         "fp8_e5m2 kv-cache is not supported with {} checkpoints", config->name());
}

std::optional<std::string> remap_kv_scale_name(const std::string& name) {
  const size_t at = name.rfind(kAttn);
  if (at == std::string::npos) return std::nullopt;
  const std::string rest = name.substr(at + kAttn.size());
  for (const Spelling& s : kSpellings)
    if (rest == s.suffix) return name.substr(0, at + kAttn.size()) + qlm_suffix(s.which);
  return std::nullopt;
}

struct KVCacheQuantMethod::Slot {
  Which which;
  std::vector<std::pair<std::string, Parameter*>> params;  // checkpoint name -> dense param
  std::optional<float> direct;                               // from load()
  std::string direct_name;
};

KVCacheQuantMethod::KVCacheQuantMethod(std::string attn_prefix, KVCacheDType dtype)
    : prefix_(std::move(attn_prefix)), dtype_(dtype) {
  for (Which w : {Which::K, Which::V, Which::Q, Which::KV, Which::Prob}) slots_.push_back(Slot{w, {}, {}, {}});
}

KVCacheQuantMethod::~KVCacheQuantMethod() = default;

void KVCacheQuantMethod::register_params(ModuleSet& modules) {
  for (const Spelling& s : kSpellings) {
    const std::string name = prefix_ + "." + s.suffix;
    Parameter& p = modules.add_dense(name, {1}, DType::F32, /*optional=*/true);
    slots_[static_cast<size_t>(s.which)].params.emplace_back(name, &p);
  }
}

bool KVCacheQuantMethod::load(const std::string& checkpoint_name, const Tensor& value) {
  if (checkpoint_name.rfind(prefix_ + ".", 0) != 0) return false;
  const std::string rest = checkpoint_name.substr(prefix_.size() + 1);
  for (const Spelling& s : kSpellings) {
    if (rest != s.suffix) continue;
    if (value.numel() != 1)
      fail("kv_cache.scale_shape", {.file = {}, .tensor = checkpoint_name, .layer = prefix_},
           "qlm's fp8 KV cache takes one scale per tensor (per-head scales are not supported yet)",
           "KV-cache scale {} has shape {}; expected a scalar ([] or [1])", checkpoint_name, shape_str(value.shape()));
    Slot& slot = slots_[static_cast<size_t>(s.which)];
    slot.direct = static_cast<float>(value.to(DType::F32).contiguous().data<float>()[0]);
    slot.direct_name = checkpoint_name;
    return true;
  }
  return false;
}

void KVCacheQuantMethod::process_weights_after_loading() {
  auto value_of = [&](const Slot& slot) -> std::optional<std::pair<float, std::string>> {
    if (slot.direct) return std::pair{*slot.direct, slot.direct_name};
    for (const auto& [name, p] : slot.params)
      if (p->written_at_all()) return std::pair{p->data().contiguous().data<float>()[0], name};
    return std::nullopt;
  };
  auto checked = [&](const Slot& slot) -> std::optional<float> {
    auto v = value_of(slot);
    if (!v) return std::nullopt;
    if (!std::isfinite(v->first) || v->first <= 0)
      fail("kv_cache.scale", {.file = {}, .tensor = v->second, .layer = prefix_},
           "the checkpoint's KV-cache scales are corrupt; re-export them, or drop them to use 1.0",
           "KV-cache scale {} of attention layer {} is {}; it must be finite and > 0", v->second, prefix_, v->first);
    return v->first;
  };
  std::optional<float> k = checked(slots_[static_cast<size_t>(Which::K)]);
  std::optional<float> v = checked(slots_[static_cast<size_t>(Which::V)]);
  std::optional<float> kv = checked(slots_[static_cast<size_t>(Which::KV)]);
  (void)checked(slots_[static_cast<size_t>(Which::Q)]);
  (void)checked(slots_[static_cast<size_t>(Which::Prob)]);
  if (!k && kv) k = kv;
  if (!v && kv) v = kv;
  if (k && !v) v = k;  // one of k/v serves both (vLLM: max(k, v) when only one was loaded)
  if (v && !k) k = v;
  from_checkpoint_ = k.has_value();
  k_scale_ = k.value_or(1.0f);
  v_scale_ = v.value_or(1.0f);
}

void KVCacheQuantMethod::quantize(const float* x, int64_t n, float scale, uint8_t* out) const {
  const float inv = 1.0f / scale;
  switch (dtype_) {
    case KVCacheDType::Fp8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_e4m3(x[i] * inv);
      return;
    case KVCacheDType::Fp8E5M2:
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_e5m2(x[i] * inv, /*saturate=*/true);
      return;
    case KVCacheDType::Auto: break;
  }
  QLM_CHECK(false && "KV cache dtype auto is not quantized");
}

void KVCacheQuantMethod::dequantize(const uint8_t* in, int64_t n, float scale, float* out) const {
  switch (dtype_) {
    case KVCacheDType::Fp8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(in[i]) * scale;
      return;
    case KVCacheDType::Fp8E5M2:
      for (int64_t i = 0; i < n; ++i) out[i] = e5m2_to_f32(in[i]) * scale;
      return;
    case KVCacheDType::Auto: break;
  }
  QLM_CHECK(false && "KV cache dtype auto is not quantized");
}

std::string kv_scale_report(const std::vector<const KVCacheQuantMethod*>& layers) {
  if (layers.empty() || !layers.front()->quantized()) return "KV cache auto (model dtype)";
  size_t loaded = 0;
  for (const KVCacheQuantMethod* l : layers) loaded += l->has_checkpoint_scales() ? 1 : 0;
  std::string s = fmt::format("KV cache {}: scales from the checkpoint for {} of {} attention layers",
                              kv_cache_dtype_name(layers.front()->dtype()), loaded, layers.size());
  if (loaded < layers.size()) s += fmt::format(", {} defaulted to 1.0", layers.size() - loaded);
  return s;
}

}  // namespace qlm
