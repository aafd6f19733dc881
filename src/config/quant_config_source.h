// Locates THE quantization config of a model directory (RELIABILITY.md C1/C2). Candidates:
//   config.json: quantization_config   (transformers; the one vLLM reads)
//   config.json: compression_config    (older llm-compressor exports)
//   config.json: text_config.quantization_config  (multimodal wrappers)
//   hf_quant_config.json               (ModelOpt legacy: {producer, quantization: {quant_algo, ...}})
//   quantize_config.json               (AutoGPTQ / GPTQModel legacy)
//   quant_config.json                  (AutoAWQ legacy: w_bit, q_group_size, zero_point, version)
// The first present in this order is authoritative; every other one present is cross-checked on
// the fields that change numerics, and a disagreement is "config.conflict" naming both files.
// Per-format fields are NOT validated here (the quantization layer does that); only the top level
// and quant_method are type-checked.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/json.h"

namespace qlm::config {

struct QuantConfigSource {
  // The authoritative config object. For hf_quant_config.json this is the whole file with
  // "quant_method": "modelopt" added when the file has none, so it resolves like the
  // config.json form.
  io::JsonView config;
  // As written (or "modelopt" for hf_quant_config.json); aliases are resolved by the quant layer.
  std::string quant_method;
  // "config.json: quantization_config", "quantize_config.json", ...: the authoritative source first,
  // then every other source found (all of which agreed with it).
  std::vector<std::string> origins;
  // Findings that are not errors, e.g. a legacy file that shares no field with the config it sits
  // beside.
  std::vector<std::string> warnings;

  const std::string& origin() const { return origins.front(); }
};

// Reads config.json (if present) and the legacy files. nullopt when no source exists. Throws
// "config.conflict" (two sources disagree), "config.missing_key" / "config.type" / "config.value"
// (quant_method absent, not a string, or empty; a source that is not an object), and json.* for
// malformed files.
std::optional<QuantConfigSource> find_quant_config(const std::filesystem::path& model_dir);

// Tensor names whose suffix only quantized checkpoints use (.qweight, .qzeros, .weight_packed,
// .weight_scale, .weight_scale_inv, .weight_zero_point, bitsandbytes .absmax / .SCB / .quant_map).
std::vector<std::string> quantized_tensor_names(const std::vector<std::string>& tensor_names);

// "config.missing_quantization" when there is no quantization config but quantized tensors are
// present (the loader would otherwise read packed int32 words as weights). Names a few of them.
void check_quantized_tensors_have_config(const std::optional<QuantConfigSource>& source,
                                         const std::vector<std::string>& tensor_names,
                                         const std::filesystem::path& model_dir);

}  // namespace qlm::config
