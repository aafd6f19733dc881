#include "kernels/cpu/scaled_mm_act_quant.h"

#include <algorithm>
#include <cmath>

#include "core/float_convert.h"

namespace qlm {
namespace {

float absmax_of(const float* x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

float inverse(float s) { return s > 0 ? 1.0f / s : 0.0f; }

int8_t int8_code(float v, float inv, int32_t zp) {
  float r = std::nearbyint(v * inv);  // round half to even
  r = std::clamp(r, -1024.0f, 1024.0f);
  return static_cast<int8_t>(std::clamp(static_cast<int32_t>(r) + zp, -128, 127));
}

float fp8_value(float v, float inv) {
  return e4m3_to_f32(f32_to_e4m3(std::clamp(v * inv, -kE4M3Max, kE4M3Max)));
}

void for_rows(int64_t M, int64_t K, ThreadPool* pool, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool && M * K >= (1 << 16)) pool->parallel_for(0, M, 1, fn);
  else fn(0, M);
}

float tensor_absmax(const float* x, int64_t M, int64_t K) {
  float m = 0;
  for (int64_t r = 0; r < M; ++r) m = std::max(m, absmax_of(x + r * K, K));
  return m;
}

}  // namespace

ActScales quantize_acts_int8(const ScaledMMConfig& c, const ScaledMMWeights& w, const float* x, int64_t M,
                             int8_t* q, int64_t ldq, ThreadPool* pool) {
  const int64_t K = c.K_p;
  ActScales s;
  s.scale.assign(static_cast<size_t>(M), 0.0f);
  s.zero.assign(static_cast<size_t>(M), 0);
  float tensor_scale = 0, tensor_inv = 0;
  if (c.act == ActScheme::StaticTensor) {
    tensor_scale = w.input_scale;
    tensor_inv = inverse(tensor_scale);
  } else if (c.act == ActScheme::DynamicTensor) {
    const float am = tensor_absmax(x, M, K);
    tensor_scale = am / 127.0f;
    tensor_inv = am > 0 ? 127.0f / am : 0.0f;
  }
  for_rows(M, K, pool, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * K;
      int8_t* qr = q + r * ldq;
      float scale = tensor_scale, inv = tensor_inv;
      int32_t zp = 0;
      switch (c.act) {
        case ActScheme::StaticTensor: zp = c.act_symmetric ? 0 : w.input_zero_point; break;
        case ActScheme::DynamicTensor: break;
        case ActScheme::DynamicToken:
          if (c.act_symmetric) {
            const float am = absmax_of(xr, K);
            scale = am / 127.0f;
            inv = am > 0 ? 127.0f / am : 0.0f;
          } else {
            float lo = 0, hi = 0;  // the range always holds 0, so 0 is exact
            for (int64_t k = 0; k < K; ++k) {
              lo = std::min(lo, xr[k]);
              hi = std::max(hi, xr[k]);
            }
            scale = (hi - lo) / 255.0f;
            inv = inverse(scale);
            zp = scale > 0 ? static_cast<int32_t>(std::nearbyint(-128.0f - lo / scale)) : 0;
          }
          break;
        case ActScheme::None:
        case ActScheme::DynamicTokenGroup: QLM_CHECK(false && "not an INT8 activation scheme"); break;
      }
      for (int64_t k = 0; k < K; ++k) qr[k] = int8_code(xr[k], inv, zp);
      s.scale[static_cast<size_t>(r)] = scale;
      s.zero[static_cast<size_t>(r)] = zp;
    }
  });
  return s;
}

ActScales quantize_acts_fp8(const ScaledMMConfig& c, const ScaledMMWeights& w, const float* x, int64_t M,
                            float* q, int64_t ldq, ThreadPool* pool) {
  const int64_t K = c.K_p;
  ActScales s;
  const int64_t phase = c.act == ActScheme::DynamicTokenGroup ? w.k_phase % c.act_group : 0;
  s.groups = c.act == ActScheme::DynamicTokenGroup ? (K + phase + c.act_group - 1) / c.act_group : 1;
  s.scale.assign(static_cast<size_t>(M * s.groups), 0.0f);
  s.zero.assign(static_cast<size_t>(M), 0);
  float tensor_scale = 0;
  if (c.act == ActScheme::StaticTensor) tensor_scale = w.input_scale;
  if (c.act == ActScheme::DynamicTensor) tensor_scale = tensor_absmax(x, M, K) / kE4M3Max;
  for_rows(M, K, pool, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * K;
      float* qr = q + r * ldq;
      float* sr = s.scale.data() + r * s.groups;
      switch (c.act) {
        case ActScheme::StaticTensor:
        case ActScheme::DynamicTensor: {
          const float inv = inverse(tensor_scale);
          for (int64_t k = 0; k < K; ++k) qr[k] = fp8_value(xr[k], inv);
          sr[0] = tensor_scale;
          break;
        }
        case ActScheme::DynamicToken: {
          const float scale = std::max(absmax_of(xr, K) / kE4M3Max, 1.0f / (kE4M3Max * 512.0f));
          const float inv = inverse(scale);
          for (int64_t k = 0; k < K; ++k) qr[k] = fp8_value(xr[k], inv);
          sr[0] = scale;
          break;
        }
        case ActScheme::DynamicTokenGroup:
          for (int64_t g = 0; g < s.groups; ++g) {
            const int64_t k0 = std::max<int64_t>(0, g * c.act_group - phase);
            const int64_t k1 = std::min<int64_t>(K, (g + 1) * c.act_group - phase);
            const float scale = std::max(absmax_of(xr + k0, k1 - k0), 1e-10f) / kE4M3Max;
            const float inv = inverse(scale);
            for (int64_t k = k0; k < k1; ++k) qr[k] = fp8_value(xr[k], inv);
            sr[g] = scale;
          }
          break;
        case ActScheme::None: QLM_CHECK(false && "float activations are not quantized"); break;
      }
    }
  });
  return s;
}

}  // namespace qlm
