// Loads and stores of the element types as float, for the .cu files of this folder. Stores round
// to nearest even, like core/float_convert.h; the fp8 KV-cache types use a port of its exact
// integer conversions (C++20 std::bit_cast is not available to nvcc's C++17), so a device cache
// holds the same bytes as ops::KvCache for the same inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/pdl.cuh"
#include "runtime/ops/cuda/launch.h"

namespace qlm::ops::cu {

// Every kernel of this folder starts with pdl_enter() (or pdl_enter_next_first(), or waits first and lets the next
// launch later: wait_for_predecessor / allow_dependents) and is launched with launch_pdl (kernels/cuda/pdl.cuh): on
// sm_90 the next kernel of a decode step launches while this one runs, and its set-up overlaps.
using qlm::cuda::allow_dependents;
using qlm::cuda::launch_pdl;
using qlm::cuda::pdl_enter;
using qlm::cuda::pdl_enter_next_first;
using qlm::cuda::wait_for_predecessor;

namespace fp8 {
// Rounds `value >> shift` to nearest, ties to even. shift >= 1.
__device__ __forceinline__ uint32_t shift_round_even(uint32_t value, int shift) {
  if (shift > 31) return 0;
  uint32_t kept = value >> shift;
  const uint32_t rem = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u))) ++kept;
  return kept;
}

// |x| (finite, f32 bits without sign) in a 1-E-M format; a result past the largest finite code
// means overflow (the callers saturate).
template <int E, int M>
__device__ __forceinline__ uint32_t encode_magnitude(uint32_t abs_bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t min_normal_bits = static_cast<uint32_t>(127 - bias + 1) << 23;
  if (abs_bits < min_normal_bits) {
    const int e = static_cast<int>(abs_bits >> 23);
    if (e == 0) return 0;  // f32 subnormals are far below any fp8 subnormal
    const uint32_t m = (abs_bits & 0x7fffffu) | 0x800000u;
    return shift_round_even(m, 151 - bias - M - e);
  }
  const uint32_t rebased = abs_bits - (static_cast<uint32_t>(127 - bias) << 23);
  return shift_round_even(rebased, 23 - M);  // a mantissa carry bumps the exponent
}

template <int E, int M>
__device__ __forceinline__ float decode_magnitude(uint32_t code) {  // exponent field below the maximum
  constexpr int bias = (1 << (E - 1)) - 1;
  const uint32_t exp = code >> M, man = code & ((1u << M) - 1u);
  if (exp == 0) return static_cast<float>(man) * __uint_as_float(static_cast<uint32_t>(127 + 1 - bias - M) << 23);
  return __uint_as_float(((exp - bias + 127) << 23) | (man << (23 - M)));
}

// e4m3fn: saturates to ±448 (infinities too), NaN -> S.1111.111.
__device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  uint32_t code = encode_magnitude<4, 3>(a);
  if (code > 0x7eu) code = 0x7eu;
  return static_cast<uint8_t>(sign | code);
}
__device__ __forceinline__ float e4m3_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24, code = v & 0x7fu;
  if (code == 0x7fu) return __uint_as_float(sign | 0x7fc00000u);
  return __uint_as_float(sign | __float_as_uint(decode_magnitude<4, 3>(code)));
}

// e5m2, saturating: finite overflow and infinities -> ±57344, NaN -> S.11111.10.
__device__ __forceinline__ uint8_t f32_to_e5m2(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7bu);
  uint32_t code = encode_magnitude<5, 2>(a);
  if (code >= 0x7cu) code = 0x7bu;
  return static_cast<uint8_t>(sign | code);
}
__device__ __forceinline__ float e5m2_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24, code = v & 0x7fu;
  if ((code >> 2) == 0x1fu) return __uint_as_float(sign | 0x7f800000u | ((code & 3u) << 21));
  return __uint_as_float(sign | __float_as_uint(decode_magnitude<5, 2>(code)));
}
}  // namespace fp8

template <ElemType T>
struct Elem;
template <>
struct Elem<ElemType::F32> {
  using type = float;
  static __device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(float* p, int64_t i, float x) { p[i] = x; }
};
template <>
struct Elem<ElemType::F16> {
  using type = __half;
  static __device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
  static __device__ __forceinline__ void store(__half* p, int64_t i, float x) { p[i] = __float2half_rn(x); }
};
template <>
struct Elem<ElemType::BF16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float x) { p[i] = __float2bfloat16_rn(x); }
};

template <>
struct Elem<ElemType::F8E4M3> {
  using type = uint8_t;
  static __device__ __forceinline__ float load(const uint8_t* p, int64_t i) { return fp8::e4m3_to_f32(p[i]); }
  // A NaN is stored as the positive NaN code, as ops::KvCache does.
  static __device__ __forceinline__ void store(uint8_t* p, int64_t i, float x) {
    p[i] = isnan(x) ? uint8_t{0x7f} : fp8::f32_to_e4m3(x);
  }
};
template <>
struct Elem<ElemType::F8E5M2> {
  using type = uint8_t;
  static __device__ __forceinline__ float load(const uint8_t* p, int64_t i) { return fp8::e5m2_to_f32(p[i]); }
  static __device__ __forceinline__ void store(uint8_t* p, int64_t i, float x) {
    p[i] = isnan(x) ? uint8_t{0x7e} : fp8::f32_to_e5m2(x);
  }
};

template <ElemType T>
__device__ __forceinline__ float load_elem(const void* p, int64_t i) {
  return Elem<T>::load(static_cast<const typename Elem<T>::type*>(p), i);
}
template <ElemType T>
__device__ __forceinline__ void store_elem(void* p, int64_t i, float x) {
  Elem<T>::store(static_cast<typename Elem<T>::type*>(p), i, x);
}

// Calls f(std::integral_constant-like tag) with the ElemType as a template argument:
// dispatch(type, [&](auto tag) { kernel<decltype(tag)::value><<<...>>>(...); }).
template <ElemType T>
struct ElemTag {
  static constexpr ElemType value = T;
};
template <typename F>
cudaError_t dispatch(ElemType type, F&& f) {
  switch (type) {
    case ElemType::F32: f(ElemTag<ElemType::F32>{}); break;
    case ElemType::F16: f(ElemTag<ElemType::F16>{}); break;
    case ElemType::BF16: f(ElemTag<ElemType::BF16>{}); break;
    default: return cudaErrorInvalidValue;  // fp8: KV-cache storage only (dispatch_kv)
  }
  return cudaGetLastError();
}

// dispatch() over every KV-cache storage type, fp8 included.
template <typename F>
cudaError_t dispatch_kv(ElemType type, F&& f) {
  switch (type) {
    case ElemType::F8E4M3: f(ElemTag<ElemType::F8E4M3>{}); return cudaGetLastError();
    case ElemType::F8E5M2: f(ElemTag<ElemType::F8E5M2>{}); return cudaGetLastError();
    default: return dispatch(type, static_cast<F&&>(f));
  }
}

// Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int block) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace qlm::ops::cu
