// LlamaForCausalLM: attention_bias (q/k/v/o) and mlp_bias from the config; full causal attention.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_llama(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  const bool attention_bias = hf.text.opt_bool("attention_bias").value_or(false);
  m.qkv_bias = attention_bias;
  m.o_bias = attention_bias;
  m.mlp_bias = hf.text.opt_bool("mlp_bias").value_or(false);
  return m;
}

const ArchitectureRegistrar kLlama{{.name = "LlamaForCausalLM", .configure = configure_llama}};

}  // namespace
}  // namespace qlm::models
