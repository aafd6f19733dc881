// Key/value cache of one sequence on one tensor-parallel rank: per layer, K and V rows of
// [slots, kv_heads, head_dim] in the storage dtype. Slots are token positions 0, 1, 2, ... in order.
//
// Storage dtypes: F32 (default, exact), F16 and BF16 (rounded to nearest even on write). Values are
// stored as x / scale and read as stored · scale with per-layer k and v scales (1 unless set). fp8
// is the job of the KV-cache method (src/quant/kv_cache, FORMATS.md §7): it adds a KvDType (e.g.
// F8_E4M3), encodes/decodes in the two switches of kv_cache.cc / attention.cc, and hands each
// layer's checkpoint scales to set_scales(); the switches over KvDType have no default, so a new
// dtype fails to compile until every site handles it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace qlm::ops {

enum class KvDType : uint8_t { F32, F16, BF16 };
const char* kv_dtype_name(KvDType dtype);
// "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16"; nullopt otherwise.
std::optional<KvDType> kv_dtype_from_name(std::string_view name);
size_t kv_dtype_size(KvDType dtype);

// How values are stored.
struct KvEncoding {
  KvDType dtype = KvDType::F32;
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

  // Per-layer scales: stored = x / scale, read = stored · scale. Set before anything is written.
  void set_scales(int64_t layer, float k_scale, float v_scale);
  float k_scale(int64_t layer) const { return k_scale_[static_cast<size_t>(layer)]; }
  float v_scale(int64_t layer) const { return v_scale_[static_cast<size_t>(layer)]; }

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
  std::vector<float> k_scale_, v_scale_;
};

}  // namespace qlm::ops
