// `qlm inspect`: sorts checkpoint tensors into the storage formats their names and dtypes reveal,
// and tallies counts and bytes per dtype and per format.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace qlm::cli {

enum class TensorFormat : uint8_t {
  GptqAwqPacked,            // .qweight .qzeros .scales .g_idx
  CompressedTensorsPacked,  // .weight_packed .weight_scale .weight_zero_point .weight_g_idx .weight_shape ...
  Fp8,                      // FP8 .weight and its .weight_scale / .weight_scale_inv / .input_scale
  Int8,                     // INT8 .weight and its scales / zero points
  Bitsandbytes,             // .absmax .quant_map .SCB .quant_state.* .nested_*
  KvCacheScale,             // .k_scale .v_scale .kv_scale (attention, any prefix)
  Dense,                    // any other floating-point tensor
  Other,
};
inline constexpr size_t kTensorFormatCount = static_cast<size_t>(TensorFormat::Other) + 1;

std::string_view tensor_format_key(TensorFormat format);    // "gptq_awq_packed" (JSON)
std::string_view tensor_format_label(TensorFormat format);  // "GPTQ/AWQ packed" (text)

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  uint64_t nbytes = 0;
};

struct Tally {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct TensorSummary {
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::array<Tally, kDTypeCount> by_dtype{};
  std::array<Tally, kTensorFormatCount> by_format{};
  std::array<Tally, kDTypeCount> dense_by_dtype{};  // the Dense class split by dtype
  std::vector<std::string> warnings;                 // e.g. packed modules missing their scales
};

// Classifies every tensor. A tensor's format is decided by its module (the name before the last
// '.'): the module's packed/FP8/INT8 weight decides what its scale tensors are.
TensorSummary summarize_tensors(const std::vector<TensorEntry>& tensors);

}  // namespace qlm::cli
