#include "runtime/ops/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/float_convert.h"

namespace qlm::ops {

const char* kv_dtype_name(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return "f32";
    case KvDType::F16: return "f16";
    case KvDType::BF16: return "bf16";
  }
  return "?";
}

std::optional<KvDType> kv_dtype_from_name(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return KvDType::F32;
  if (name == "f16" || name == "float16" || name == "fp16") return KvDType::F16;
  if (name == "bf16" || name == "bfloat16") return KvDType::BF16;
  return std::nullopt;
}

size_t kv_dtype_size(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return 4;
    case KvDType::F16: return 2;
    case KvDType::BF16: return 2;
  }
  return 0;
}

KvCache::KvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, KvEncoding encoding)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), encoding_(encoding),
      k_(static_cast<size_t>(layers)), v_(static_cast<size_t>(layers)),
      k_scale_(static_cast<size_t>(layers), 1.0f), v_scale_(static_cast<size_t>(layers), 1.0f) {
  QLM_CHECK(layers > 0 && kv_heads > 0 && head_dim > 0);
}

void KvCache::set_scales(int64_t layer, float k_scale, float v_scale) {
  QLM_CHECK(layer >= 0 && layer < layers_ && k_scale > 0 && v_scale > 0 && length_ == 0);
  k_scale_[static_cast<size_t>(layer)] = k_scale;
  v_scale_[static_cast<size_t>(layer)] = v_scale;
}

uint64_t KvCache::bytes() const {
  return 2ull * static_cast<uint64_t>(layers_) * static_cast<uint64_t>(capacity_ * row_elems()) *
         kv_dtype_size(encoding_.dtype);
}

void KvCache::reserve(int64_t slots) {
  if (slots <= capacity_) return;
  const int64_t grown = std::max<int64_t>({slots, capacity_ * 2, 16});
  const size_t nbytes = static_cast<size_t>(grown * row_elems()) * kv_dtype_size(encoding_.dtype);
  for (auto* side : {&k_, &v_})
    for (auto& buffer : *side) buffer.resize(nbytes);
  capacity_ = grown;
}

namespace {
void encode_row(KvDType dtype, float scale, const float* src, std::byte* dst, int64_t n) {
  switch (dtype) {
    case KvDType::F32:
      if (scale == 1.0f) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      } else {
        float* d = reinterpret_cast<float*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = src[i] / scale;
      }
      return;
    case KvDType::F16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i] / scale);
      return;
    }
    case KvDType::BF16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i] / scale);
      return;
    }
  }
}
}  // namespace

void KvCache::write(int64_t layer, int64_t slot0, const float* k, const float* v, int64_t tokens, int64_t stride) {
  QLM_CHECK(layer >= 0 && layer < layers_ && slot0 >= 0 && slot0 + tokens <= capacity_);
  const size_t row_bytes = static_cast<size_t>(row_elems()) * kv_dtype_size(encoding_.dtype);
  std::byte* kd = k_[static_cast<size_t>(layer)].data();
  std::byte* vd = v_[static_cast<size_t>(layer)].data();
  for (int64_t t = 0; t < tokens; ++t) {
    const size_t off = static_cast<size_t>(slot0 + t) * row_bytes;
    encode_row(encoding_.dtype, k_scale(layer), k + t * stride, kd + off, row_elems());
    encode_row(encoding_.dtype, v_scale(layer), v + t * stride, vd + off, row_elems());
  }
}

void KvCache::commit(int64_t tokens) {
  QLM_CHECK(tokens >= 0 && length_ + tokens <= capacity_);
  length_ += tokens;
}

void KvCache::truncate(int64_t length) {
  QLM_CHECK(length >= 0 && length <= length_);
  length_ = length;
}

}  // namespace qlm::ops
