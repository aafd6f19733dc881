// A model directory's config.json: the architecture fields qlm builds models from, read with
// strict types (JsonView), plus the raw document for everything else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/json.h"

namespace qlm::config {

inline constexpr std::string_view kConfigFileName = "config.json";

struct HfConfig {
  // The whole config.json; unknown keys stay reachable here.
  io::JsonView raw;
  // Where the text-model fields were read: `raw` itself, or raw.text_config for multimodal
  // wrappers (Llama 4, Gemma 3, Mistral 3, ...) whose top level has no hidden_size.
  io::JsonView text;

  std::vector<std::string> architectures;  // empty when absent or null
  std::string model_type;
  // "torch_dtype" or its newer spelling "dtype" (both present must agree: "config.conflict").
  std::optional<std::string> dtype;

  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t vocab_size = 0;
  std::optional<int64_t> intermediate_size;
  std::optional<int64_t> head_dim;  // as written; see resolved_head_dim()
  std::optional<int64_t> max_position_embeddings;
  std::optional<double> rms_norm_eps;
  // From rope_theta, or from rope_parameters.rope_theta (transformers >= 4.56 spelling).
  std::optional<double> rope_theta;
  // rope_scaling, or rope_parameters when rope_scaling is absent; kept as written.
  std::optional<io::JsonView> rope_scaling;
  bool tie_word_embeddings = false;
  // config.json's quantization_config object, if present and not null. Which quantization config
  // is authoritative is decided by find_quant_config (quant_config_source.h), not here.
  std::optional<io::JsonView> quantization_config;

  // head_dim when given, else hidden_size / num_attention_heads.
  int64_t resolved_head_dim() const;

  // Reads the fields from a parsed config.json. Throws "config.missing_key" / "config.type" /
  // "config.value" (non-positive sizes, heads not divisible by kv heads, hidden_size not divisible
  // by heads when head_dim is absent) / "config.conflict", naming the key and the file.
  static HfConfig from_json(const io::JsonView& config_json);
  // Reads `model_dir`/config.json ("json.read" if absent, json.* for malformed JSON).
  static HfConfig load(const std::filesystem::path& model_dir);
};

}  // namespace qlm::config
