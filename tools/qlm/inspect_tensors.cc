#include "tools/qlm/inspect_tensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

namespace qlm::cli {
namespace {

constexpr size_t kShownExamples = 3;

std::string_view module_of(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

std::string_view leaf_of(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool is_fp8(DType d) {
  return d == DType::F8_E4M3 || d == DType::F8_E5M2 || d == DType::F8_E4M3FNUZ || d == DType::F8_E5M2FNUZ;
}

bool one_of(std::string_view leaf, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), leaf) != names.end();
}

bool is_bitsandbytes(std::string_view name) {
  return name.ends_with(".absmax") || name.ends_with(".quant_map") || name.ends_with(".SCB") ||
         name.find(".quant_state.") != std::string_view::npos || name.find(".nested_") != std::string_view::npos;
}

// What each module's main weight says about the module.
struct ModuleKind {
  bool gptq_awq = false;  // has .qweight
  bool packed = false;    // has .weight_packed
  bool fp8 = false;       // .weight is FP8
  bool int8 = false;      // .weight is I8
  std::set<std::string, std::less<>> leaves;
};

TensorFormat classify(const TensorEntry& t, const ModuleKind& module) {
  const std::string_view leaf = leaf_of(t.name);
  if (one_of(leaf, {"k_scale", "v_scale", "kv_scale"})) return TensorFormat::KvCacheScale;
  if (module.gptq_awq && one_of(leaf, {"qweight", "qzeros", "scales", "g_idx"})) return TensorFormat::GptqAwqPacked;
  if (module.packed && one_of(leaf, {"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx",
                                     "weight_shape", "weight_global_scale", "input_global_scale", "input_scale"}))
    return TensorFormat::CompressedTensorsPacked;
  if (module.fp8 && one_of(leaf, {"weight", "weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale"}))
    return TensorFormat::Fp8;
  if (module.int8 &&
      one_of(leaf, {"weight", "weight_scale", "weight_zero_point", "input_scale", "input_zero_point"}))
    return TensorFormat::Int8;
  if (is_bitsandbytes(t.name)) return TensorFormat::Bitsandbytes;
  if (dtype_info(t.dtype).is_float && !is_fp8(t.dtype)) return TensorFormat::Dense;
  return TensorFormat::Other;
}

void warn_incomplete(const std::map<std::string, ModuleKind, std::less<>>& modules, TensorSummary& summary) {
  std::vector<std::string> lacking;
  for (const auto& [name, m] : modules) {
    if (m.gptq_awq && !(m.leaves.contains("scales") && m.leaves.contains("qzeros")))
      lacking.push_back(name);
    else if (m.packed && !m.leaves.contains("weight_scale"))
      lacking.push_back(name);
  }
  if (lacking.empty()) return;
  const size_t shown = std::min(lacking.size(), kShownExamples);
  summary.warnings.push_back(fmt::format(
      "{} packed module(s) lack their scales or zero points (.scales/.qzeros or .weight_scale): {}{}",
      lacking.size(), fmt::join(lacking.begin(), lacking.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
      lacking.size() > shown ? ", ..." : ""));
}

}  // namespace

std::string_view tensor_format_key(TensorFormat format) {
  switch (format) {
    case TensorFormat::GptqAwqPacked: return "gptq_awq_packed";
    case TensorFormat::CompressedTensorsPacked: return "compressed_tensors_packed";
    case TensorFormat::Fp8: return "fp8";
    case TensorFormat::Int8: return "int8";
    case TensorFormat::Bitsandbytes: return "bitsandbytes";
    case TensorFormat::KvCacheScale: return "kv_cache_scale";
    case TensorFormat::Dense: return "dense";
    case TensorFormat::Other: return "other";
  }
  return "other";
}

std::string_view tensor_format_label(TensorFormat format) {
  switch (format) {
    case TensorFormat::GptqAwqPacked: return "GPTQ/AWQ packed";
    case TensorFormat::CompressedTensorsPacked: return "compressed-tensors packed";
    case TensorFormat::Fp8: return "FP8 weights + scales";
    case TensorFormat::Int8: return "INT8 weights + scales";
    case TensorFormat::Bitsandbytes: return "bitsandbytes state";
    case TensorFormat::KvCacheScale: return "KV-cache scales";
    case TensorFormat::Dense: return "dense float";
    case TensorFormat::Other: return "other";
  }
  return "other";
}

TensorSummary summarize_tensors(const std::vector<TensorEntry>& tensors) {
  std::map<std::string, ModuleKind, std::less<>> modules;
  for (const TensorEntry& t : tensors) {
    ModuleKind& m = modules[std::string(module_of(t.name))];
    const std::string_view leaf = leaf_of(t.name);
    m.leaves.emplace(leaf);
    if (leaf == "qweight") m.gptq_awq = true;
    if (leaf == "weight_packed") m.packed = true;
    if (leaf == "weight" && is_fp8(t.dtype)) m.fp8 = true;
    if (leaf == "weight" && t.dtype == DType::I8) m.int8 = true;
  }

  TensorSummary summary;
  for (const TensorEntry& t : tensors) {
    const TensorFormat format = classify(t, modules.find(module_of(t.name))->second);
    const auto d = static_cast<size_t>(t.dtype);
    for (Tally* tally : {&summary.by_dtype[d], &summary.by_format[static_cast<size_t>(format)]}) {
      tally->count += 1;
      tally->bytes += t.nbytes;
    }
    if (format == TensorFormat::Dense) {
      summary.dense_by_dtype[d].count += 1;
      summary.dense_by_dtype[d].bytes += t.nbytes;
    }
    summary.count += 1;
    summary.bytes += t.nbytes;
  }
  warn_incomplete(modules, summary);
  return summary;
}

}  // namespace qlm::cli
