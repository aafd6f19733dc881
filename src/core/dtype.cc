#include "core/dtype.h"

#include <array>

#include "core/error.h"

namespace qlm {
namespace {

// Indexed by DType; the static_assert below keeps it in step with the enum.
constexpr std::array<DTypeInfo, kDTypeCount> kTable = {{
    {DType::F64, "F64", 64, true, true},
    {DType::F32, "F32", 32, true, true},
    {DType::F16, "F16", 16, true, true},
    {DType::BF16, "BF16", 16, true, true},
    {DType::F8_E4M3, "F8_E4M3", 8, true, true},
    {DType::F8_E5M2, "F8_E5M2", 8, true, true},
    {DType::I64, "I64", 64, false, true},
    {DType::I32, "I32", 32, false, true},
    {DType::I16, "I16", 16, false, true},
    {DType::I8, "I8", 8, false, true},
    {DType::U8, "U8", 8, false, false},
    {DType::U16, "U16", 16, false, false},
    {DType::U32, "U32", 32, false, false},
    {DType::U64, "U64", 64, false, false},
    {DType::BOOL, "BOOL", 8, false, false},
    {DType::F4, "F4", 4, true, true},
    {DType::F6_E2M3, "F6_E2M3", 6, true, true},
    {DType::F6_E3M2, "F6_E3M2", 6, true, true},
    {DType::F8_E8M0, "F8_E8M0", 8, true, false},
    {DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, true, true},
    {DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, true, true},
    {DType::C64, "C64", 64, true, true},
}};

constexpr bool table_in_enum_order() {
  for (int i = 0; i < kDTypeCount; ++i)
    if (static_cast<int>(kTable[i].dtype) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "kTable must list DTypes in enum order");

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  auto i = static_cast<size_t>(dtype);
  QLM_CHECK(i < kTable.size());
  return kTable[i];
}

size_t dtype_size(DType d) {
  int bits = dtype_bits(d);
  if (bits % 8 != 0)
    fail("dtype.sub_byte", {}, "address such tensors as raw bytes",
         "dtype {} has {} bits per element, not a whole number of bytes", dtype_name(d), bits);
  return static_cast<size_t>(bits / 8);
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kTable)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::string PackedIntType::name() const {
  if (bias == 0) return fmt::format("uint{}", bits);
  return fmt::format("uint{}b{}", bits, bias);
}

}  // namespace qlm
