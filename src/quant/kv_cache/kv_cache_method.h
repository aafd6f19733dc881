// Quantized KV cache (FORMATS.md §7, RELIABILITY.md row 26 / B.5 item 24): the cache dtype, the
// per-attention-layer k/v scales loaded from the checkpoint, and the (de)quantization the attention
// calls. Encoding: cache = fp8(x / scale); read = fp8 * scale.
//
// Use from the model runtime (src/runtime/kv_cache_scales.cc), per attention layer
// `model.layers.N.self_attn`:
//   KVCacheDType dt = parse_kv_cache_dtype(opts.kv_cache_dtype);          // "auto" | "f16" | "fp8" | ...
//   check_kv_cache_dtype(dt, quant_config);                                // fp8_e5m2 + fp8 checkpoint -> error
//   auto kv = quant_config->get_kv_cache_method(...);   // or make_unique<KVCacheQuantMethod>(prefix, dt)
//   kv->set_dtype(dt); kv->set_head_counts(num_heads, num_kv_heads);
//   kv->register_params(modules, shape_of);  // every checkpoint spelling of k/v scales becomes an optional tensor
//   ... load_checkpoint(...) ...
//   kv->process_weights_after_loading();                     // validates; absent scales default to 1.0
//   cache.set_head_scales(N, kv->k_scales(first_kv_head, kv_heads), kv->v_scales(...));  // this rank's heads
//   std::string line = kv_scale_report(methods);             // "KV cache fp8_e4m3: scales from the checkpoint for 30 of 32 layers, 2 defaulted to 1.0"
// Scales are per tensor (a scalar) or per kv head (compressed-tensors strategy attn_head: a tensor
// of num_key_value_heads elements, e.g. [kv_heads, 1, 1]; one of num_attention_heads elements is
// reduced to the kv heads by the max over each group, as vLLM does for q_scale).
// With a dtype that is not fp8 the method is inert: quantized() is false and the cache ignores the scales.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quant/quantization_config.h"

namespace qlm {

class ModuleSet;
class Parameter;

// The --kv-cache-dtype vocabulary. Auto: the model's activation dtype (F32 on the CPU, --dtype on
// CUDA), or fp8_e4m3 for a compressed-tensors checkpoint with a kv_cache_scheme (as vLLM).
enum class KVCacheDType : uint8_t { Auto, F32, F16, BF16, Fp8E4M3, Fp8E5M2 };
const char* kv_cache_dtype_name(KVCacheDType d);  // "auto", "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"
bool kv_cache_dtype_is_fp8(KVCacheDType d);
// "auto", "f32" ("float32", "fp32"), "f16" ("float16", "fp16"), "bf16" ("bfloat16"), "fp8" (=
// fp8_e4m3), "fp8_e4m3", "fp8_e5m2"; anything else is "config.kv_cache_dtype" listing them.
KVCacheDType parse_kv_cache_dtype(const std::string& name);
// vLLM: a checkpoint with its own KV scales (fp8, compressed-tensors kv_cache_scheme) cannot use
// fp8_e5m2 ("config.kv_cache_dtype").
void check_kv_cache_dtype(KVCacheDType d, const QuantizationConfig* config);

// Maps a checkpoint KV-scale tensor name to qlm's name "<layer>.self_attn.attn.{k,v,q}_scale"
// (FORMATS.md §7 maybe_remap_kv_scale_name + Fp8Config.get_cache_scale). A legacy `kv_scale`
// maps to "...attn.kv_scale" (used for both k and v). nullopt: not a KV-scale name.
std::optional<std::string> remap_kv_scale_name(const std::string& checkpoint_name);

// The shape of a checkpoint tensor by name; nullopt when the checkpoint has no such tensor.
using ScaleShapeLookup = std::function<std::optional<Shape>(const std::string& name)>;

class KVCacheQuantMethod final : public KVCacheMethod {
 public:
  // `attn_prefix`: the attention module, e.g. "model.layers.0.self_attn".
  KVCacheQuantMethod(std::string attn_prefix, KVCacheDType dtype);
  ~KVCacheQuantMethod() override;
  std::string name() const override { return "kv_cache"; }

  // The cache dtype is the runtime's choice (--kv-cache-dtype); a format only declares the scales.
  void set_dtype(KVCacheDType dtype) { dtype_ = dtype; }
  // The model's attention heads and kv heads (all ranks): what a per-head scale tensor must hold.
  // Unset (0): only scalar scales are accepted.
  void set_head_counts(int64_t total_heads, int64_t total_kv_heads);

  // Adds optional F32 dense params to `modules` under every checkpoint spelling of this layer's
  // k/v/q scales, so the loader consumes them. Scalars are declared [1]; with `shape_of`, a
  // per-head tensor of the checkpoint is declared with its own shape when it holds one scale per
  // kv head (or per attention head), and any other shape is "kv_cache.scale_shape" naming the
  // tensor, its shape and what was expected. Without `shape_of` a non-scalar is "loader.shape".
  void register_params(ModuleSet& modules, const ScaleShapeLookup& shape_of = {});
  // Alternatively, hand over one tensor directly (its name in any spelling). False: not ours.
  bool load(const std::string& checkpoint_name, const Tensor& value);
  // Collects the loaded scales: k and v from their own tensors, or both from a legacy kv_scale;
  // only one of k/v present: it serves both. Non-finite or <= 0 -> "kv_cache.scale" naming the
  // layer (and head); absent -> 1.0.
  void process_weights_after_loading();

  const std::string& prefix() const { return prefix_; }
  KVCacheDType dtype() const { return dtype_; }
  bool quantized() const { return kv_cache_dtype_is_fp8(dtype_); }
  bool has_checkpoint_scales() const { return from_checkpoint_; }
  bool per_head() const { return k_scales_.size() > 1 || v_scales_.size() > 1; }
  // Per-tensor scales; for per-head scales the largest head's (vLLM's host float).
  float k_scale() const { return k_scale_; }
  float v_scale() const { return v_scale_; }
  // The scales of kv heads [first, first + count) (a tensor-parallel rank's heads); a per-tensor
  // scale is repeated.
  std::vector<float> k_scales(int64_t first_kv_head, int64_t count) const;
  std::vector<float> v_scales(int64_t first_kv_head, int64_t count) const;

  // out[i] = fp8(x[i] / scale) (saturating), in[i] -> fp8 * scale. Only when quantized().
  void quantize_k(const float* x, int64_t n, uint8_t* out) const { quantize(x, n, k_scale_, out); }
  void quantize_v(const float* x, int64_t n, uint8_t* out) const { quantize(x, n, v_scale_, out); }
  void dequantize_k(const uint8_t* in, int64_t n, float* out) const { dequantize(in, n, k_scale_, out); }
  void dequantize_v(const uint8_t* in, int64_t n, float* out) const { dequantize(in, n, v_scale_, out); }
  void quantize(const float* x, int64_t n, float scale, uint8_t* out) const;
  void dequantize(const uint8_t* in, int64_t n, float scale, float* out) const;

 private:
  struct Slot;  // one scale (k, v, q or legacy kv) and the params that may carry it
  std::string prefix_;
  KVCacheDType dtype_;
  std::vector<Slot> slots_;
  int64_t total_heads_ = 0, total_kv_heads_ = 0;
  bool from_checkpoint_ = false;
  float k_scale_ = 1.0f, v_scale_ = 1.0f;
  std::vector<float> k_scales_{1.0f}, v_scales_{1.0f};  // one, or total_kv_heads_
  // Checks a scale tensor's element count; returns whether it is per head.
  bool check_scale_shape(const std::string& checkpoint_name, int which, const Shape& shape) const;
};

// "KV cache fp8_e4m3: scales from the checkpoint for A of B attention layers[ (per head)][, C defaulted to 1.0]",
// or "KV cache auto (model dtype)" when the methods are not fp8 (or there are none).
std::string kv_scale_report(const std::vector<const KVCacheQuantMethod*>& layers);

}  // namespace qlm
