// Qwen3MoeForCausalLM: Qwen3 attention (q/k RMSNorm over head_dim, attention_bias on q/k/v/o) and
// routed-expert MLPs "mlp" as in Qwen2-MoE without a shared expert; norm_topk_prob (transformers'
// default false, true in the released checkpoints) decides the renormalisation.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_qwen3_moe(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  const bool attention_bias = hf.text.opt_bool("attention_bias").value_or(false);
  m.qkv_bias = attention_bias;
  m.o_bias = attention_bias;
  m.qk_norm = true;
  m.sliding_window = windows_from_layer_types(hf, m.num_layers);
  m.moe = qwen_moe_config(hf, m.num_layers, /*default_norm_topk=*/false, /*shared_expert=*/false);
  return m;
}

const ArchitectureRegistrar kQwen3Moe{{.name = "Qwen3MoeForCausalLM", .configure = configure_qwen3_moe}};

}  // namespace
}  // namespace qlm::models
