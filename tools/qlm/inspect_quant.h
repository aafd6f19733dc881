// `qlm inspect`: a lenient, display-only reading of a quantization config. Every known field is
// shown under whichever spelling the file uses, as written; a field whose JSON type is not what
// its format uses is shown anyway and reported as a warning (the quantization layer will reject
// it when loading). Nothing here decides how a checkpoint loads.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "io/json.h"

namespace qlm::cli {

struct QuantSummary {
  // "bits" -> 4, "quantization.quant_algo" -> "FP8", ... as written, except kv_cache_scheme objects,
  // which are condensed like the groups' QuantizationArgs.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  // compressed-tensors config_groups: name -> {targets, weights, input_activations, output_activations, format},
  // the QuantizationArgs condensed to one line each ("int4 sym strategy=group group_size=128").
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  std::vector<std::string> other_keys;  // present but not summarized (damp_percent, meta, ...)
  std::vector<std::string> warnings;
};

QuantSummary summarize_quant_config(const io::JsonView& config);

}  // namespace qlm::cli
