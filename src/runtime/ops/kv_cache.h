// Key/value cache of one sequence on one tensor-parallel rank: per layer, K and V rows of
// [slots, kv_heads, head_dim] in the storage dtype. Slots are token positions 0, 1, 2, ... in order.
//
// Storage dtypes: F32 (default, exact), F16 and BF16 (rounded to nearest even on write), and fp8
// F8E4M3 (e4m3fn, saturating to ±448) / F8E5M2 (saturating to ±57344), rounded to nearest even with
// the exact conversions of core/float_convert.h (FORMATS.md §7); a NaN is stored as the positive
// NaN code (0x7F / 0x7E) whatever its sign, as a GPU's division does not keep a NaN's sign. Values are stored as x / scale
// (an IEEE division, not a reciprocal product) and read as stored · scale, with k and v scales per
// layer and kv head (1 unless set; the model hands over the checkpoint's scales from the KV-cache
// method, src/quant/kv_cache). The switches over KvDType have no default, so a new dtype fails to
// compile until every site (kv_cache.cc, attention.cc, cuda/device_kv_cache.cc) handles it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qlm::ops {

enum class KvDType : uint8_t { F32, F16, BF16, F8E4M3, F8E5M2 };
// "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2" (the --kv-cache-dtype spelling; the names the CLI
// accepts, "auto" included, are parsed by parse_kv_cache_dtype in quant/kv_cache).
const char* kv_dtype_name(KvDType dtype);
size_t kv_dtype_size(KvDType dtype);
bool kv_dtype_is_fp8(KvDType dtype);
inline constexpr uint8_t kKvNanE4M3 = 0x7f, kKvNanE5M2 = 0x7e;  // the NaN codes the fp8 caches store

// One element, exactly as the cache stores it: encode(x, scale) = code of x / scale (F32: the
// quotient itself), decode(code) · scale reads it back. `out` / `in` point at kv_dtype_size bytes.
void kv_encode(KvDType dtype, float x, float scale, void* out);
float kv_decode(KvDType dtype, const void* in);

// How values are stored.
struct KvEncoding {
  KvDType dtype = KvDType::F32;
};

// The k and v scales of a cache: one per layer and kv head, 1 unless set. Both the host cache and
// the device cache (ops/cuda/device_kv_cache.h) keep their scales in one of these.
class KvScales {
 public:
  KvScales(int64_t layers, int64_t kv_heads);
  // One scale per kv head of `layer` (k and v of size kv_heads), finite and positive.
  void set(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales);
  // The same scale for every kv head of `layer`.
  void set_uniform(int64_t layer, float k_scale, float v_scale);
  float k(int64_t layer, int64_t kv_head) const { return k_[index(layer, kv_head)]; }
  float v(int64_t layer, int64_t kv_head) const { return v_[index(layer, kv_head)]; }
  // All k scales, then all v scales, each [layers, kv_heads] row-major.
  std::vector<float> k_then_v() const;

 private:
  size_t index(int64_t layer, int64_t kv_head) const { return static_cast<size_t>(layer * kv_heads_ + kv_head); }
  int64_t layers_, kv_heads_;
  std::vector<float> k_, v_;
};

class KvCache {
 public:
  KvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, KvEncoding encoding = {});

  int64_t layers() const { return layers_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  const KvEncoding& encoding() const { return encoding_; }
  int64_t length() const { return length_; }  // committed slots
  int64_t capacity() const { return capacity_; }
  uint64_t bytes() const;  // storage in use by all layers (capacity, K and V)

  // Scales: stored = x / scale, read = stored · scale. Set before anything is written.
  // set_scales: one k and one v scale for every kv head of `layer`; set_head_scales: one per kv
  // head of this rank (k and v of size kv_heads()).
  void set_scales(int64_t layer, float k_scale, float v_scale);
  void set_head_scales(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales);
  float k_scale(int64_t layer, int64_t kv_head = 0) const { return scales_.k(layer, kv_head); }
  float v_scale(int64_t layer, int64_t kv_head = 0) const { return scales_.v(layer, kv_head); }

  // Ensures room for `slots` slots in every layer (grows geometrically, keeps the contents).
  void reserve(int64_t slots);
  // Writes `tokens` rows of K and V (each row kv_heads·head_dim floats, rows `stride` floats apart)
  // into slots [slot0, slot0 + tokens) of `layer`. Room must have been reserved.
  void write(int64_t layer, int64_t slot0, const float* k, const float* v, int64_t tokens, int64_t stride);
  // Makes `tokens` more slots visible: call once all layers wrote them.
  void commit(int64_t tokens);
  void truncate(int64_t length);
  void clear() { truncate(0); }

  // Encoded rows of `layer`: element (slot, head, i) at [(slot · kv_heads + head) · head_dim + i].
  const void* k_data(int64_t layer) const { return k_[static_cast<size_t>(layer)].data(); }
  const void* v_data(int64_t layer) const { return v_[static_cast<size_t>(layer)].data(); }

 private:
  int64_t row_elems() const { return kv_heads_ * head_dim_; }
  int64_t layers_, kv_heads_, head_dim_;
  KvEncoding encoding_;
  int64_t length_ = 0, capacity_ = 0;
  std::vector<std::vector<std::byte>> k_, v_;
  KvScales scales_;
};

}  // namespace qlm::ops
