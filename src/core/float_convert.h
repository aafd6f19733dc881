// Exact conversions between f32 and the 16- and 8-bit float formats. All float->narrow conversions
// round to nearest, ties to even, and keep NaN as NaN. Header-only so kernels can inline them.
#pragma once

#include <bit>
#include <cstdint>

namespace qlm {

inline uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float f32_from_bits(uint32_t u) { return std::bit_cast<float>(u); }

namespace detail {
// Rounds `value >> shift` to nearest, ties to even. shift >= 1.
inline uint32_t shift_round_even(uint32_t value, int shift) {
  if (shift > 31) return 0;
  uint32_t kept = value >> shift;
  uint32_t rem = value & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u))) ++kept;
  return kept;
}

// An IEEE-like binary format of at most 16 bits: 1 sign bit, `E` exponent bits, `M` mantissa bits.
// Encodes |x| (sign handled by the caller) for finite, non-NaN input. Returns the code without the
// sign; a result at or above `first_overflow_code` means the value rounded past the largest finite.
template <int E, int M>
inline uint32_t encode_magnitude(uint32_t abs_bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t min_normal_bits = static_cast<uint32_t>(127 - bias + 1) << 23;
  if (abs_bits < min_normal_bits) {
    // Subnormal (or zero) in the target: code = round(|x| / 2^(1 - bias - M)).
    int e = static_cast<int>(abs_bits >> 23);
    if (e == 0) return 0;  // f32 subnormals are far below any target subnormal
    uint32_t m = (abs_bits & 0x7fffffu) | 0x800000u;
    int shift = 151 - bias - M - e;
    return shift_round_even(m, shift);
  }
  uint32_t rebased = abs_bits - (static_cast<uint32_t>(127 - bias) << 23);
  return shift_round_even(rebased, 23 - M);  // a mantissa carry correctly bumps the exponent
}

template <int E, int M>
inline float decode_magnitude(uint32_t code) {  // code without sign, exponent field < max
  constexpr int bias = (1 << (E - 1)) - 1;
  uint32_t exp = code >> M;
  uint32_t man = code & ((1u << M) - 1u);
  if (exp == 0) {
    // man * 2^(1 - bias - M), exact in f32.
    return static_cast<float>(man) * f32_from_bits(static_cast<uint32_t>(127 + 1 - bias - M) << 23);
  }
  return f32_from_bits(((exp - bias + 127) << 23) | (man << (23 - M)));
}
}  // namespace detail

// ---- f16 (IEEE binary16) ----
inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t code = detail::encode_magnitude<5, 10>(a);
  if (code >= 0x7c00u) code = 0x7c00u;  // overflow rounds to infinity
  return static_cast<uint16_t>(sign | code);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | f32_bits(detail::decode_magnitude<5, 10>(h & 0x7fffu)));
}

// ---- bf16 ----
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// ---- fp8 e4m3fn: bias 7, no infinities, S.1111.111 is NaN, largest finite 448 (0x7E) ----
inline constexpr float kE4M3Max = 448.0f;
// Out-of-range values and infinities saturate to +-448 (CUDA's satfinite); NaN stays NaN.
inline uint8_t f32_to_e4m3(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  uint32_t code = detail::encode_magnitude<4, 3>(a);
  if (code > 0x7eu) code = 0x7eu;
  return static_cast<uint8_t>(sign | code);
}

inline float e4m3_to_f32(uint8_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t code = v & 0x7fu;
  if (code == 0x7fu) return f32_from_bits(sign | 0x7fc00000u);
  return f32_from_bits(sign | f32_bits(detail::decode_magnitude<4, 3>(code)));
}

inline bool e4m3_is_nan(uint8_t v) { return (v & 0x7fu) == 0x7fu; }

// ---- fp4 e2m1 (OCP MX / NVFP4 elements): S.EE.M, bias 1, no infinities or NaN; magnitudes 0, 0.5, 1, 1.5, 2, 3,
// 4, 6. Every value is exact in e4m3 (and bf16). ----
inline float e2m1_to_f32(uint8_t nibble) {
  constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[nibble & 7u];
  return (nibble & 8u) ? -m : m;
}
// The e4m3 code of the same value (sign kept, so nibble 8, -0, gives 0x80).
inline uint8_t e2m1_to_e4m3(uint8_t nibble) {
  constexpr uint8_t kMagnitude[8] = {0x00, 0x30, 0x38, 0x3C, 0x40, 0x44, 0x48, 0x4C};
  return static_cast<uint8_t>(kMagnitude[nibble & 7u] | ((nibble & 8u) << 4));
}

// ---- e8m0 (OCP MX block scales): an unsigned biased exponent, 2^(e - 127); 0xFF is NaN. ----
inline bool e8m0_is_nan(uint8_t e) { return e == 0xFFu; }
inline float e8m0_to_f32(uint8_t e) {
  if (e8m0_is_nan(e)) return f32_from_bits(0x7fc00000u);
  // 2^-127 is below the normal range: the subnormal with only mantissa bit 22 set.
  return e == 0 ? f32_from_bits(0x00400000u) : f32_from_bits(static_cast<uint32_t>(e) << 23);
}

// ---- fp8 e5m2: bias 15, IEEE-like with infinities (0x7C) and NaNs, largest finite 57344 ----
inline constexpr float kE5M2Max = 57344.0f;
// Overflow rounds to infinity unless `saturate`, which clamps finite values and infinities to
// +-57344 (CUDA's satfinite).
inline uint8_t f32_to_e5m2(float f, bool saturate = false) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | (saturate ? 0x7bu : 0x7cu));
  uint32_t code = detail::encode_magnitude<5, 2>(a);
  if (code >= 0x7cu) code = saturate ? 0x7bu : 0x7cu;
  return static_cast<uint8_t>(sign | code);
}

inline float e5m2_to_f32(uint8_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t code = v & 0x7fu;
  if ((code >> 2) == 0x1fu) return f32_from_bits(sign | 0x7f800000u | ((code & 3u) << 21));
  return f32_from_bits(sign | f32_bits(detail::decode_magnitude<5, 2>(code)));
}

inline bool e5m2_is_nan(uint8_t v) { return (v & 0x7fu) > 0x7cu; }

}  // namespace qlm
