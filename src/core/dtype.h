// Element types: every safetensors dtype, and the packed integer types of quantized formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qlm {

// Storage element types. The first group is what qlm computes with; the rest exist so that every
// dtype the safetensors format allows can be read, inspected and reported.
enum class DType : uint8_t {
  F64,
  F32,
  F16,
  BF16,
  F8_E4M3,  // e4m3fn: no infinities, 0x7F/0xFF are NaN, max 448
  F8_E5M2,
  I64,
  I32,
  I16,
  I8,
  U8,
  U16,
  U32,
  U64,
  BOOL,
  // Read and reported, not computed with (yet).
  F4,  // e2m1, two per byte
  F6_E2M3,
  F6_E3M2,
  F8_E8M0,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  C64,
};

inline constexpr int kDTypeCount = static_cast<int>(DType::C64) + 1;

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // safetensors spelling, e.g. "BF16"
  int bits;               // storage bits per element
  bool is_float;
  bool is_signed;
};

const DTypeInfo& dtype_info(DType dtype);
inline std::string_view dtype_name(DType d) { return dtype_info(d).name; }
inline int dtype_bits(DType d) { return dtype_info(d).bits; }
// Whole bytes per element; only valid for dtypes of 8 bits or more (checked).
size_t dtype_size(DType d);
// Parses the exact safetensors spelling ("F16", not "f16"); nullopt for anything else.
std::optional<DType> dtype_from_name(std::string_view name);

// C++ type <-> DType for typed access.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::I16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::U16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::U32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::U64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::BOOL; };

// Integer code types of quantized weights (vLLM's ScalarType for integers): `bits` wide fields,
// stored unsigned, whose real value is `code - bias`. uint4b8 is GPTQ's symmetric 4-bit (bias 8),
// uint4 is AWQ's code used with explicit zero points (bias 0).
struct PackedIntType {
  int bits = 4;    // 2, 3, 4 or 8
  int bias = 0;    // subtracted from the unsigned code; 2^(bits-1) for symmetric formats
  constexpr uint32_t mask() const { return (1u << bits) - 1u; }
  constexpr int max_code() const { return static_cast<int>(mask()); }
  // Fields per int32 word when fields do not straddle words (32/bits; 3-bit straddles).
  constexpr int pack_factor() const { return 32 / bits; }
  std::string name() const;  // "uint4b8", "uint4", "uint3b4", ...
  friend constexpr bool operator==(PackedIntType, PackedIntType) = default;
};

inline constexpr PackedIntType kUint4{4, 0};
inline constexpr PackedIntType kUint4b8{4, 8};
inline constexpr PackedIntType kUint8{8, 0};
inline constexpr PackedIntType kUint8b128{8, 128};

}  // namespace qlm
