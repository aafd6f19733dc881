// Device helpers shared by the CUDA scaled-mm .cu files: float loads/stores of the activation
// types and exact e4m3 conversions (ports of core/float_convert.h: round half to even,
// saturation to ±448, NaN kept).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qlm::cuda {

template <typename T>
__device__ __forceinline__ float load_float(const T* p, int64_t i);
template <>
__device__ __forceinline__ float load_float<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float load_float<__half>(const __half* p, int64_t i) { return __half2float(p[i]); }
template <>
__device__ __forceinline__ float load_float<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}

template <typename T>
__device__ __forceinline__ void store_float(T* p, int64_t i, float v);
template <>
__device__ __forceinline__ void store_float<float>(float* p, int64_t i, float v) { p[i] = v; }
template <>
__device__ __forceinline__ void store_float<__half>(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
template <>
__device__ __forceinline__ void store_float<__nv_bfloat16>(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ uint32_t shift_round_even(uint32_t value, int shift) {
  if (shift > 31) return 0;
  const uint32_t kept = value >> shift;
  const uint32_t rem = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
}

// f32 -> e4m3fn, identical to qlm::f32_to_e4m3.
__device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  uint32_t code;
  if (a < (121u << 23)) {  // below e4m3's smallest normal 2^-6: subnormal code man * 2^-9
    const int e = static_cast<int>(a >> 23);
    code = e == 0 ? 0u : shift_round_even((a & 0x7fffffu) | 0x800000u, 141 - e);
  } else {
    code = shift_round_even(a - (120u << 23), 20);  // a mantissa carry bumps the exponent
  }
  if (code > 0x7eu) code = 0x7eu;
  return static_cast<uint8_t>(sign | code);
}

// e4m3fn -> f32, identical to qlm::e4m3_to_f32.
__device__ __forceinline__ float e4m3_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t code = v & 0x7fu;
  if (code == 0x7fu) return __uint_as_float(sign | 0x7fc00000u);
  const uint32_t exp = code >> 3, man = code & 7u;
  if (exp == 0) return __uint_as_float(sign | __float_as_uint(static_cast<float>(man) * 0.001953125f));  // 2^-9
  return __uint_as_float(sign | ((exp + 120u) << 23) | (man << 20));
}

// std::clamp's exact semantics (NaN passes through), unlike fminf/fmaxf.
__device__ __forceinline__ float clamp_like_std(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

// v / scale (as v * inv) to an INT8 code with zero point zp: round half to even, then saturate to [-128, 127] — the
// CPU quantizer's arithmetic (kernels/cpu/scaled_mm_act_quant.cc), so codes match it bit for bit.
__device__ __forceinline__ int8_t int8_code(float v, float inv, int32_t zp) {
  float r = rintf(__fmul_rn(v, inv));  // round half to even
  r = clamp_like_std(r, -1024.0f, 1024.0f);
  int32_t q = static_cast<int32_t>(r) + zp;
  return static_cast<int8_t>(q < -128 ? -128 : (q > 127 ? 127 : q));
}

// The symmetric INT8 scale of values with absolute maximum `absmax` (absmax / 127), and in `inv` the reciprocal the
// quantizers multiply by (0 for an all-zero range).
__device__ __forceinline__ float int8_symmetric_scale(float absmax, float& inv) {
  const float scale = __fdiv_rn(absmax, 127.0f);
  inv = absmax > 0 ? __fdiv_rn(127.0f, absmax) : 0.0f;
  return scale;
}

}  // namespace qlm::cuda
