// Qwen3ForCausalLM: RMSNorm over head_dim on every q and k head before rotary (q_norm, k_norm);
// attention_bias covers q/k/v/o; head_dim is explicit in the config; windows as in Qwen2.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_qwen3(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  const bool attention_bias = hf.text.opt_bool("attention_bias").value_or(false);
  m.qkv_bias = attention_bias;
  m.o_bias = attention_bias;
  m.qk_norm = true;
  m.sliding_window = windows_from_layer_types(hf, m.num_layers);
  return m;
}

const ArchitectureRegistrar kQwen3{{.name = "Qwen3ForCausalLM", .configure = configure_qwen3}};

}  // namespace
}  // namespace qlm::models
