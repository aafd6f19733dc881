#include "quant/kv_cache/kv_cache_method.h"

#include <algorithm>
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
    case KVCacheDType::F32: return "f32";
    case KVCacheDType::F16: return "f16";
    case KVCacheDType::BF16: return "bf16";
    case KVCacheDType::Fp8E4M3: return "fp8_e4m3";
    case KVCacheDType::Fp8E5M2: return "fp8_e5m2";
  }
  return "?";
}

bool kv_cache_dtype_is_fp8(KVCacheDType d) { return d == KVCacheDType::Fp8E4M3 || d == KVCacheDType::Fp8E5M2; }

KVCacheDType parse_kv_cache_dtype(const std::string& name) {
  if (name == "auto") return KVCacheDType::Auto;
  if (name == "f32" || name == "float32" || name == "fp32") return KVCacheDType::F32;
  if (name == "f16" || name == "float16" || name == "fp16") return KVCacheDType::F16;
  if (name == "bf16" || name == "bfloat16") return KVCacheDType::BF16;
  if (name == "fp8" || name == "fp8_e4m3") return KVCacheDType::Fp8E4M3;
  if (name == "fp8_e5m2") return KVCacheDType::Fp8E5M2;
  fail("config.kv_cache_dtype", {.file = "--kv-cache-dtype", .tensor = {}, .layer = {}},
       "use auto, f32, f16, bf16, fp8 (= fp8_e4m3), fp8_e4m3 or fp8_e5m2", "unknown KV cache dtype '{}'", name);
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
  std::optional<std::vector<float>> direct;                 // from load()
  std::string direct_name;
};

KVCacheQuantMethod::KVCacheQuantMethod(std::string attn_prefix, KVCacheDType dtype)
    : prefix_(std::move(attn_prefix)), dtype_(dtype) {
  for (Which w : {Which::K, Which::V, Which::Q, Which::KV, Which::Prob}) slots_.push_back(Slot{w, {}, {}, {}});
}

KVCacheQuantMethod::~KVCacheQuantMethod() = default;

void KVCacheQuantMethod::set_head_counts(int64_t total_heads, int64_t total_kv_heads) {
  QLM_CHECK(total_heads > 0 && total_kv_heads > 0 && total_heads % total_kv_heads == 0);
  total_heads_ = total_heads;
  total_kv_heads_ = total_kv_heads;
}

bool KVCacheQuantMethod::check_scale_shape(const std::string& checkpoint_name, int which, const Shape& shape) const {
  const int64_t n = shape_numel(shape);
  if (n == 1) return false;
  // compressed-tensors attn_head: one scale per kv head ([kv_heads] or [kv_heads, 1, 1]); q may
  // also have one per attention head, which k/v accept too (reduced to the kv heads by group max).
  const bool heads_known = total_kv_heads_ > 0;
  const bool ok = heads_known && static_cast<Which>(which) != Which::Prob &&
                  (n == total_kv_heads_ || n == total_heads_);
  if (!ok)
    fail("kv_cache.scale_shape", {.file = {}, .tensor = checkpoint_name, .layer = prefix_},
         "qlm's fp8 KV cache takes one scale per tensor or per-head scales (compressed-tensors attn_head) with "
         "one element per kv head",
         "KV-cache scale {} of attention layer {} has shape {}; expected a scalar ([] or [1]){}", checkpoint_name,
         prefix_, shape_str(shape),
         heads_known ? fmt::format(" or per-head scales of {} elements (num_key_value_heads){}", total_kv_heads_,
                                   total_heads_ != total_kv_heads_
                                       ? fmt::format(" or {} (num_attention_heads)", total_heads_)
                                       : std::string())
                     : std::string(" (per-head scales need the model's head counts)"));
  return true;
}

void KVCacheQuantMethod::register_params(ModuleSet& modules, const ScaleShapeLookup& shape_of) {
  for (const Spelling& s : kSpellings) {
    const std::string name = prefix_ + "." + s.suffix;
    Shape shape{1};
    if (shape_of)
      if (const std::optional<Shape> found = shape_of(name);
          found && check_scale_shape(name, static_cast<int>(s.which), *found))
        shape = *found;
    Parameter& p = modules.add_dense(name, shape, DType::F32, /*optional=*/true);
    slots_[static_cast<size_t>(s.which)].params.emplace_back(name, &p);
  }
}

bool KVCacheQuantMethod::load(const std::string& checkpoint_name, const Tensor& value) {
  if (checkpoint_name.rfind(prefix_ + ".", 0) != 0) return false;
  const std::string rest = checkpoint_name.substr(prefix_.size() + 1);
  for (const Spelling& s : kSpellings) {
    if (rest != s.suffix) continue;
    check_scale_shape(checkpoint_name, static_cast<int>(s.which), value.shape());
    Slot& slot = slots_[static_cast<size_t>(s.which)];
    slot.direct = value.to(DType::F32).contiguous().to_float_vector();
    slot.direct_name = checkpoint_name;
    return true;
  }
  return false;
}

void KVCacheQuantMethod::process_weights_after_loading() {
  auto value_of = [&](const Slot& slot) -> std::optional<std::pair<std::vector<float>, std::string>> {
    if (slot.direct) return std::pair{*slot.direct, slot.direct_name};
    for (const auto& [name, p] : slot.params)
      if (p->written_at_all()) return std::pair{p->data().contiguous().to_float_vector(), name};
    return std::nullopt;
  };
  // Validated, and reduced to one per kv head when the tensor holds one per attention head.
  auto checked = [&](const Slot& slot) -> std::optional<std::vector<float>> {
    auto v = value_of(slot);
    if (!v) return std::nullopt;
    std::vector<float>& values = v->first;
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]) || values[i] <= 0)
        fail("kv_cache.scale", {.file = {}, .tensor = v->second, .layer = prefix_},
             "the checkpoint's KV-cache scales are corrupt; re-export them, or drop them to use 1.0",
             "KV-cache scale {}{} of attention layer {} is {}; it must be finite and > 0", v->second,
             values.size() > 1 ? fmt::format(" (head {})", i) : std::string(), prefix_, values[i]);
    const int64_t n = static_cast<int64_t>(values.size());
    if (n > 1 && n == total_heads_ && n != total_kv_heads_) {
      const int64_t group = total_heads_ / total_kv_heads_;
      std::vector<float> reduced(static_cast<size_t>(total_kv_heads_), 0.0f);
      for (int64_t h = 0; h < n; ++h)
        reduced[static_cast<size_t>(h / group)] = std::max(reduced[static_cast<size_t>(h / group)], values[static_cast<size_t>(h)]);
      values = std::move(reduced);
    }
    return std::move(values);
  };
  std::optional<std::vector<float>> k = checked(slots_[static_cast<size_t>(Which::K)]);
  std::optional<std::vector<float>> v = checked(slots_[static_cast<size_t>(Which::V)]);
  std::optional<std::vector<float>> kv = checked(slots_[static_cast<size_t>(Which::KV)]);
  (void)checked(slots_[static_cast<size_t>(Which::Q)]);
  (void)checked(slots_[static_cast<size_t>(Which::Prob)]);
  if (!k && kv) k = kv;
  if (!v && kv) v = kv;
  if (k && !v) v = k;  // one of k/v serves both (vLLM: max(k, v) when only one was loaded)
  if (v && !k) k = v;
  from_checkpoint_ = k.has_value();
  k_scales_ = k.value_or(std::vector<float>{1.0f});
  v_scales_ = v.value_or(std::vector<float>{1.0f});
  k_scale_ = *std::max_element(k_scales_.begin(), k_scales_.end());
  v_scale_ = *std::max_element(v_scales_.begin(), v_scales_.end());
}

namespace {
std::vector<float> slice_heads(const std::vector<float>& scales, int64_t first, int64_t count) {
  if (scales.size() == 1) return std::vector<float>(static_cast<size_t>(count), scales.front());
  QLM_CHECK(first >= 0 && count >= 0 && first + count <= static_cast<int64_t>(scales.size()));
  return std::vector<float>(scales.begin() + first, scales.begin() + first + count);
}
}  // namespace

std::vector<float> KVCacheQuantMethod::k_scales(int64_t first_kv_head, int64_t count) const {
  return slice_heads(k_scales_, first_kv_head, count);
}

std::vector<float> KVCacheQuantMethod::v_scales(int64_t first_kv_head, int64_t count) const {
  return slice_heads(v_scales_, first_kv_head, count);
}

void KVCacheQuantMethod::quantize(const float* x, int64_t n, float scale, uint8_t* out) const {
  switch (dtype_) {
    case KVCacheDType::Fp8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_e4m3(x[i] / scale);  // as ops::KvCache
      return;
    case KVCacheDType::Fp8E5M2:
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_e5m2(x[i] / scale, /*saturate=*/true);
      return;
    case KVCacheDType::Auto:
    case KVCacheDType::F32:
    case KVCacheDType::F16:
    case KVCacheDType::BF16: break;
  }
  QLM_CHECK(false && "the KV cache dtype is not fp8");
}

void KVCacheQuantMethod::dequantize(const uint8_t* in, int64_t n, float scale, float* out) const {
  switch (dtype_) {
    case KVCacheDType::Fp8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(in[i]) * scale;
      return;
    case KVCacheDType::Fp8E5M2:
      for (int64_t i = 0; i < n; ++i) out[i] = e5m2_to_f32(in[i]) * scale;
      return;
    case KVCacheDType::Auto:
    case KVCacheDType::F32:
    case KVCacheDType::F16:
    case KVCacheDType::BF16: break;
  }
  QLM_CHECK(false && "the KV cache dtype is not fp8");
}

std::string kv_scale_report(const std::vector<const KVCacheQuantMethod*>& layers) {
  if (layers.empty() || !layers.front()->quantized()) return "KV cache auto (model dtype)";
  size_t loaded = 0;
  for (const KVCacheQuantMethod* l : layers) loaded += l->has_checkpoint_scales() ? 1 : 0;
  size_t per_head = 0;
  for (const KVCacheQuantMethod* l : layers) per_head += l->per_head() ? 1 : 0;
  std::string s = fmt::format("KV cache {}: scales from the checkpoint for {} of {} attention layers",
                              kv_cache_dtype_name(layers.front()->dtype()), loaded, layers.size());
  if (per_head > 0) s += per_head == loaded ? " (per head)" : fmt::format(" ({} per head)", per_head);
  if (loaded < layers.size()) s += fmt::format(", {} defaulted to 1.0", layers.size() - loaded);
  return s;
}

}  // namespace qlm
