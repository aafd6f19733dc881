#include "runtime/ops/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/float_convert.h"

namespace qlm::ops {

const char* kv_dtype_name(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return "f32";
    case KvDType::F16: return "f16";
    case KvDType::BF16: return "bf16";
    case KvDType::F8E4M3: return "fp8_e4m3";
    case KvDType::F8E5M2: return "fp8_e5m2";
  }
  return "?";
}

size_t kv_dtype_size(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32: return 4;
    case KvDType::F16: return 2;
    case KvDType::BF16: return 2;
    case KvDType::F8E4M3: return 1;
    case KvDType::F8E5M2: return 1;
  }
  return 0;
}

bool kv_dtype_is_fp8(KvDType dtype) {
  switch (dtype) {
    case KvDType::F32:
    case KvDType::F16:
    case KvDType::BF16: return false;
    case KvDType::F8E4M3:
    case KvDType::F8E5M2: return true;
  }
  return false;
}

namespace {
// Encodes n values x[i] / scale; the quotient is an IEEE f32 division (the device cache does the same).
void encode_n(KvDType dtype, float scale, const float* src, std::byte* dst, int64_t n) {
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
    case KvDType::F8E4M3: {
      uint8_t* d = reinterpret_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const float q = src[i] / scale;
        d[i] = std::isnan(q) ? kKvNanE4M3 : f32_to_e4m3(q);  // saturates to ±448
      }
      return;
    }
    case KvDType::F8E5M2: {
      uint8_t* d = reinterpret_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const float q = src[i] / scale;
        d[i] = std::isnan(q) ? kKvNanE5M2 : f32_to_e5m2(q, /*saturate=*/true);  // saturates to ±57344
      }
      return;
    }
  }
}
}  // namespace

void kv_encode(KvDType dtype, float x, float scale, void* out) {
  encode_n(dtype, scale, &x, static_cast<std::byte*>(out), 1);
}

float kv_decode(KvDType dtype, const void* in) {
  switch (dtype) {
    case KvDType::F32: {
      float f;
      std::memcpy(&f, in, 4);
      return f;
    }
    case KvDType::F16: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      return f16_to_f32(h);
    }
    case KvDType::BF16: {
      uint16_t b;
      std::memcpy(&b, in, 2);
      return bf16_to_f32(b);
    }
    case KvDType::F8E4M3: return e4m3_to_f32(*static_cast<const uint8_t*>(in));
    case KvDType::F8E5M2: return e5m2_to_f32(*static_cast<const uint8_t*>(in));
  }
  return 0.0f;
}

KvScales::KvScales(int64_t layers, int64_t kv_heads)
    : layers_(layers), kv_heads_(kv_heads), k_(static_cast<size_t>(layers * kv_heads), 1.0f),
      v_(static_cast<size_t>(layers * kv_heads), 1.0f) {}

void KvScales::set(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales) {
  QLM_CHECK(layer >= 0 && layer < layers_);
  QLM_CHECK(static_cast<int64_t>(k_scales.size()) == kv_heads_ && static_cast<int64_t>(v_scales.size()) == kv_heads_);
  for (int64_t h = 0; h < kv_heads_; ++h) {
    const float k = k_scales[static_cast<size_t>(h)], v = v_scales[static_cast<size_t>(h)];
    QLM_CHECK(std::isfinite(k) && std::isfinite(v) && k > 0 && v > 0);
    k_[index(layer, h)] = k;
    v_[index(layer, h)] = v;
  }
}

void KvScales::set_uniform(int64_t layer, float k_scale, float v_scale) {
  const std::vector<float> k(static_cast<size_t>(kv_heads_), k_scale), v(static_cast<size_t>(kv_heads_), v_scale);
  set(layer, k, v);
}

std::vector<float> KvScales::k_then_v() const {
  std::vector<float> both(k_);
  both.insert(both.end(), v_.begin(), v_.end());
  return both;
}

KvCache::KvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, KvEncoding encoding)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), encoding_(encoding),
      k_(static_cast<size_t>(layers)), v_(static_cast<size_t>(layers)), scales_(layers, kv_heads) {
  QLM_CHECK(layers > 0 && kv_heads > 0 && head_dim > 0);
}

void KvCache::set_scales(int64_t layer, float k_scale, float v_scale) {
  QLM_CHECK(length_ == 0);
  scales_.set_uniform(layer, k_scale, v_scale);
}

void KvCache::set_head_scales(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales) {
  QLM_CHECK(length_ == 0);
  scales_.set(layer, k_scales, v_scales);
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

void KvCache::write(int64_t layer, int64_t slot0, const float* k, const float* v, int64_t tokens, int64_t stride) {
  QLM_CHECK(layer >= 0 && layer < layers_ && slot0 >= 0 && slot0 + tokens <= capacity_);
  const size_t row_bytes = static_cast<size_t>(row_elems()) * kv_dtype_size(encoding_.dtype);
  std::byte* kd = k_[static_cast<size_t>(layer)].data();
  std::byte* vd = v_[static_cast<size_t>(layer)].data();
  const size_t head_bytes = static_cast<size_t>(head_dim_) * kv_dtype_size(encoding_.dtype);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < kv_heads_; ++h) {
      const size_t off = static_cast<size_t>(slot0 + t) * row_bytes + static_cast<size_t>(h) * head_bytes;
      const int64_t src = t * stride + h * head_dim_;
      encode_n(encoding_.dtype, k_scale(layer, h), k + src, kd + off, head_dim_);
      encode_n(encoding_.dtype, v_scale(layer, h), v + src, vd + off, head_dim_);
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
