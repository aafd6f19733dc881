// Key/value cache of one sequence on one tensor-parallel rank: per layer, K and V rows of
// [slots, kv_heads, head_dim] in the storage dtype. Slots are token positions 0, 1, 2, ... in order.
//
// Storage dtypes: F32 (default, exact), F16 and BF16 (rounded to nearest even on write). fp8 is
// the job of a KVCacheMethod (QuantizationConfig::get_kv_cache_method, FORMATS.md §7): it will add
// a KvDType (e.g. F8_E4M3) with per-layer k/v scales in KvEncoding, and encode/decode below are the
// only code that changes; the switches over KvDType have no default, so a new dtype fails to compile
// until every site handles it.
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

// How values are stored: the dtype and (for quantized caches, later) the scales that divide
// values on write and multiply them on read.
struct KvEncoding {
  KvDType dtype = KvDType::F32;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
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
};

}  // namespace qlm::ops
