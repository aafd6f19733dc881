// Qwen2ForCausalLM: q/k/v projections always carry a bias (o_proj and the MLP do not); sliding
// windows per layer from layer_types when use_sliding_window is set.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_qwen2(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  m.qkv_bias = true;
  m.sliding_window = windows_from_layer_types(hf, m.num_layers);
  return m;
}

const ArchitectureRegistrar kQwen2{{.name = "Qwen2ForCausalLM", .configure = configure_qwen2}};

}  // namespace
}  // namespace qlm::models
