// Offline quantization of a float checkpoint's tensors into a standard 8-bit format (what
// `qlm quantize` writes), with the same quantizers as online quantization (online_quantize.h), so
// loading the result gives the same layers as `--quantization <target>` on the float checkpoint:
//   fp8              -> quant_method fp8, per-tensor weight_scale, dynamic activations; q/k/v and
//                       gate/up of a block share one scale (the fused layer's, as online)
//   fp8_per_channel  -> compressed-tensors float-quantized, channel weights, dynamic per-token
//   int8             -> compressed-tensors int-quantized W8A8, channel weights, dynamic per-token
// Quantized: 2-D float "<module>.weight" tensors of the decoder projections (q/k/v/o/gate/up/down_proj);
// everything else (embeddings, norms, lm_head, biases) is copied unchanged.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace qlm {

enum class OnlineQuant : uint8_t;

enum class QuantizeTarget : uint8_t { Fp8, Fp8PerChannel, Int8 };
// "fp8", "fp8_per_channel", "int8"; anything else is "cli.quantize_target".
QuantizeTarget parse_quantize_target(const std::string& name);
const char* quantize_target_name(QuantizeTarget t);
// The --quantization name whose online result loading the output reproduces.
const char* online_method_name(QuantizeTarget t);

struct QuantizeResult {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json quantization_config;
  size_t quantized = 0, copied = 0;
};

QuantizeResult quantize_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, QuantizeTarget target);

}  // namespace qlm
