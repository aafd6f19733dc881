// The KV cache of one sequence on a CUDA device: the device twin of ops::KvCache (same storage
// dtypes, fp8 included, encoded to the same bytes; slot layout [slots, kv_heads, head_dim] per
// layer; k/v scales per layer and kv head with stored = x / scale). Capacity grows geometrically by
// reallocating every layer and copying the slots it holds. Declared and sized in every build;
// write() needs the CUDA backend. The scales live on the host and, as F32 [2, layers, kv_heads],
// on the device (k then v), re-uploaded whenever they are set.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "runtime/ops/kv_cache.h"

namespace qlm::ops::cu {

DType kv_storage_dtype(KvDType dtype);

class DeviceKvCache {
 public:
  DeviceKvCache(Device device, int64_t layers, int64_t kv_heads, int64_t head_dim, KvEncoding encoding = {});

  Device device() const { return device_; }
  int64_t layers() const { return layers_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  const KvEncoding& encoding() const { return encoding_; }
  int64_t length() const { return length_; }  // committed slots
  int64_t capacity() const { return capacity_; }
  // Changes whenever the storage or the device scales move to other addresses (growth, scales
  // uploaded): what a captured CUDA graph that reads the cache must be re-captured after.
  uint64_t generation() const { return generation_; }

  // Before anything is written: one scale for every head, or one per kv head (size kv_heads()).
  void set_scales(int64_t layer, float k_scale, float v_scale);
  void set_head_scales(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales);
  float k_scale(int64_t layer, int64_t kv_head = 0) const { return scales_.k(layer, kv_head); }
  float v_scale(int64_t layer, int64_t kv_head = 0) const { return scales_.v(layer, kv_head); }
  // Device F32 [kv_heads] scales of `layer`.
  const float* device_k_scales(int64_t layer) const;
  const float* device_v_scales(int64_t layer) const;

  // Ensures room for `slots` slots in every layer, keeping the contents.
  void reserve(int64_t slots);
  // Writes rows t < rows(qkv) of K (columns [k_col, k_col + kv_heads·head_dim) of the F32 device
  // tensor qkv) and V (from v_col) into slots [slot0, slot0 + rows) of `layer`. Room must be reserved.
  // With slot0_dev set, the kernel reads the first slot from that device int instead (slot0 still
  // bounds-checks here).
  void write(int64_t layer, int64_t slot0, const Tensor& qkv, int64_t k_col, int64_t v_col,
             const int32_t* slot0_dev = nullptr);
  // For kernels that write `layer`'s K and V themselves (ops::cu::prepare_attention): the storage of
  // slots [slot0, slot0 + tokens) (checked against the capacity) and the device scales, uploaded here
  // on first use as write() does.
  struct WriteTarget {
    void* k = nullptr;
    void* v = nullptr;
    const float* k_scales = nullptr;
    const float* v_scales = nullptr;
  };
  WriteTarget write_target(int64_t layer, int64_t slot0, int64_t tokens);
  void commit(int64_t tokens);
  void truncate(int64_t length);

  // Storage of `layer`: [capacity, kv_heads · head_dim] in kv_storage_dtype(encoding().dtype).
  const Tensor& k(int64_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const Tensor& v(int64_t layer) const { return v_[static_cast<size_t>(layer)]; }

 private:
  int64_t row_elems() const { return kv_heads_ * head_dim_; }
  void upload_scales();
  Device device_;
  int64_t layers_, kv_heads_, head_dim_;
  KvEncoding encoding_;
  int64_t length_ = 0, capacity_ = 0;
  uint64_t generation_ = 0;
  std::vector<Tensor> k_, v_;
  KvScales scales_;
  Tensor device_scales_;  // scales_ on the device: F32 [2, layers, kv_heads]
};

}  // namespace qlm::ops::cu
