#include "runtime/ops/cuda/device_kv_cache.h"

#include <algorithm>
#include <cmath>

#include "core/device_memory.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "runtime/ops/cuda/elem_type.h"
#endif

namespace qlm::ops::cu {

DType kv_storage_dtype(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return DType::F32;
    case KvDType::F16: return DType::F16;
    case KvDType::BF16: return DType::BF16;
    case KvDType::F8E4M3: return DType::F8_E4M3;
    case KvDType::F8E5M2: return DType::F8_E5M2;
  }
  QLM_CHECK(false);
  return DType::F32;
}

DeviceKvCache::DeviceKvCache(Device device, int64_t layers, int64_t kv_heads, int64_t head_dim, KvEncoding encoding)
    : device_(device), layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), encoding_(encoding),
      k_(static_cast<size_t>(layers)), v_(static_cast<size_t>(layers)), scales_(layers, kv_heads) {
  QLM_CHECK(!device.is_cpu() && layers > 0 && kv_heads > 0 && head_dim > 0);
}

void DeviceKvCache::set_scales(int64_t layer, float k_scale, float v_scale) {
  QLM_CHECK(length_ == 0);
  scales_.set_uniform(layer, k_scale, v_scale);
  device_scales_ = Tensor();  // uploaded again on the next use
}

void DeviceKvCache::set_head_scales(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales) {
  QLM_CHECK(length_ == 0);
  scales_.set(layer, k_scales, v_scales);
  device_scales_ = Tensor();  // uploaded again on the next use
}

void DeviceKvCache::upload_scales() {
  device_scales_ = Tensor::from_vector(scales_.k_then_v(), {2, layers_, kv_heads_}).to_device(device_);
  ++generation_;
}

const float* DeviceKvCache::device_k_scales(int64_t layer) const {
  QLM_CHECK(layer >= 0 && layer < layers_ && device_scales_.defined());  // written (uploaded) first
  return device_scales_.data<float>() + layer * kv_heads_;
}

const float* DeviceKvCache::device_v_scales(int64_t layer) const {
  QLM_CHECK(layer >= 0 && layer < layers_ && device_scales_.defined());
  return device_scales_.data<float>() + (layers_ + layer) * kv_heads_;
}

void DeviceKvCache::reserve(int64_t slots) {
  if (slots <= capacity_) return;
  const int64_t grown = std::max<int64_t>({slots, capacity_ * 2, 16});
  const DType dtype = kv_storage_dtype(encoding_.dtype);
  for (auto* side : {&k_, &v_})
    for (Tensor& buffer : *side) {
      Tensor bigger = Tensor::empty({grown, row_elems()}, dtype, device_);
      if (length_ > 0) {
        // Only committed slots are kept: reserve() runs before a forward writes its slots.
        Tensor kept = bigger.narrow(0, 0, length_);
        copy_tensor_bytes(kept, buffer.narrow(0, 0, length_));
      }
      buffer = std::move(bigger);
    }
  capacity_ = grown;
  ++generation_;
}

void DeviceKvCache::commit(int64_t tokens) {
  QLM_CHECK(tokens >= 0 && length_ + tokens <= capacity_);
  length_ += tokens;
}

void DeviceKvCache::truncate(int64_t length) {
  QLM_CHECK(length >= 0 && length <= length_);
  length_ = length;
}

DeviceKvCache::WriteTarget DeviceKvCache::write_target(int64_t layer, int64_t slot0, int64_t tokens) {
  QLM_CHECK(layer >= 0 && layer < layers_ && slot0 >= 0 && tokens >= 0 && slot0 + tokens <= capacity_);
  if (!device_scales_.defined()) upload_scales();
  return {k_[static_cast<size_t>(layer)].raw_data(), v_[static_cast<size_t>(layer)].raw_data(), device_k_scales(layer),
          device_v_scales(layer)};
}

void DeviceKvCache::write(int64_t layer, int64_t slot0, const Tensor& qkv, int64_t k_col, int64_t v_col,
                          const int32_t* slot0_dev) {
  QLM_CHECK(qkv.dtype() == DType::F32 && qkv.dim() == 2 && qkv.is_contiguous() && qkv.device() == device_);
  const int64_t tokens = qkv.size(0), stride = qkv.size(1);
  QLM_CHECK(layer >= 0 && layer < layers_ && slot0 >= 0 && slot0 + tokens <= capacity_);
  QLM_CHECK(k_col >= 0 && k_col + row_elems() <= stride && v_col >= 0 && v_col + row_elems() <= stride);
#ifdef QLM_WITH_CUDA
  const WriteTarget target = write_target(layer, slot0, tokens);
  const float* base = qkv.data<float>();
  QLM_CUDA_CHECK(launch_kv_write(base + k_col, base + v_col, stride, tokens, row_elems(), head_dim_, target.k, target.v,
                                 kv_elem_type(encoding_.dtype), slot0, slot0_dev, target.k_scales, target.v_scales,
                                 qlm::cuda::context(device_.index).stream));
#else
  fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed, or use --device cpu",
       "the KV cache on {} needs the CUDA backend, which this qlm was built without", device_.str());
#endif
}

}  // namespace qlm::ops::cu
