// Quantized KV cache (FORMATS.md §7, RELIABILITY.md row 26 / B.5 item 24): the cache dtype, the
// per-attention-layer k/v scales loaded from the checkpoint, and the (de)quantization the attention
// calls. Encoding: cache = fp8(x / scale); read = fp8 * scale.
//
// Use from the model runtime, per attention layer `model.layers.N.self_attn`:
//   KVCacheDType dt = parse_kv_cache_dtype(opts.kv_cache_dtype);          // "auto" | "fp8" | ...
//   check_kv_cache_dtype(dt, quant_config);                                // fp8_e5m2 + fp8 checkpoint -> error
//   auto kv = std::make_unique<KVCacheQuantMethod>("model.layers.N.self_attn", dt);
//   kv->register_params(modules);   // every checkpoint spelling of k/v scales becomes an optional tensor
//   ... load_checkpoint(...) ...
//   kv->process_weights_after_loading();                     // validates; absent scales default to 1.0
//   std::string line = kv_scale_report(methods);             // "KV cache fp8_e4m3: scales from the checkpoint for 30 of 32 layers, 2 defaulted to 1.0"
//   kv->quantize_k(x, n, out_u8); kv->dequantize_k(in_u8, n, out_f32);   // (same for v)
// With dtype Auto the method is inert: quantized() is false and the scales stay 1.0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quant/quantization_config.h"

namespace qlm {

class ModuleSet;
class Parameter;

enum class KVCacheDType : uint8_t { Auto, Fp8E4M3, Fp8E5M2 };
const char* kv_cache_dtype_name(KVCacheDType d);  // "auto", "fp8_e4m3", "fp8_e5m2"
// "auto", "fp8" (= fp8_e4m3), "fp8_e4m3", "fp8_e5m2"; anything else is "config.kv_cache_dtype".
KVCacheDType parse_kv_cache_dtype(const std::string& name);
// vLLM: a checkpoint with its own KV scales (fp8, compressed-tensors kv_cache_scheme) cannot use
// fp8_e5m2 ("config.kv_cache_dtype").
void check_kv_cache_dtype(KVCacheDType d, const QuantizationConfig* config);

// Maps a checkpoint KV-scale tensor name to qlm's name "<layer>.self_attn.attn.{k,v,q}_scale"
// (FORMATS.md §7 maybe_remap_kv_scale_name + Fp8Config.get_cache_scale). A legacy `kv_scale`
// maps to "...attn.kv_scale" (used for both k and v). nullopt: not a KV-scale name.
std::optional<std::string> remap_kv_scale_name(const std::string& checkpoint_name);

class KVCacheQuantMethod final : public KVCacheMethod {
 public:
  // `attn_prefix`: the attention module, e.g. "model.layers.0.self_attn".
  KVCacheQuantMethod(std::string attn_prefix, KVCacheDType dtype);
  ~KVCacheQuantMethod() override;
  std::string name() const override { return "kv_cache"; }

  // Adds optional scalar F32 dense params to `modules` under every checkpoint spelling of this
  // layer's k/v/q scales, so the loader consumes them; a non-scalar tensor is "loader.shape".
  void register_params(ModuleSet& modules);
  // Alternatively, hand over one tensor directly (its name in any spelling). False: not ours.
  bool load(const std::string& checkpoint_name, const Tensor& value);
  // Collects the loaded scales: k and v from their own tensors, or both from a legacy kv_scale;
  // only one of k/v present: it serves both. Non-finite or <= 0 -> "kv_cache.scale" naming the
  // layer; absent -> 1.0.
  void process_weights_after_loading();

  const std::string& prefix() const { return prefix_; }
  KVCacheDType dtype() const { return dtype_; }
  bool quantized() const { return dtype_ != KVCacheDType::Auto; }
  bool has_checkpoint_scales() const { return from_checkpoint_; }
  float k_scale() const { return k_scale_; }
  float v_scale() const { return v_scale_; }

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
  bool from_checkpoint_ = false;
  float k_scale_ = 1.0f, v_scale_ = 1.0f;
};

// "KV cache fp8_e4m3: scales from the checkpoint for A of B attention layers[, C defaulted to 1.0]",
// or "KV cache auto (model dtype)".
std::string kv_scale_report(const std::vector<const KVCacheQuantMethod*>& layers);

}  // namespace qlm
