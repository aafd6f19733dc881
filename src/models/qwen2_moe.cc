// Qwen2MoeForCausalLM: Qwen2 attention (q/k/v bias from `qkv_bias`, default true) and routed-expert
// MLPs "mlp" (router "gate", experts "experts.<e>.{gate,up,down}_proj" of moe_intermediate_size,
// top-k weights renormalised only with norm_topk_prob, default false) plus a shared expert
// "shared_expert" of shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate · x).
// Layers in mlp_only_layers, or whose (index + 1) is not a multiple of decoder_sparse_step, have the
// dense MLP of intermediate_size.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_qwen2_moe(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  m.qkv_bias = hf.text.opt_bool("qkv_bias").value_or(true);
  m.sliding_window = windows_from_layer_types(hf, m.num_layers);
  m.moe = qwen_moe_config(hf, m.num_layers, /*default_norm_topk=*/false, /*shared_expert=*/true);
  return m;
}

const ArchitectureRegistrar kQwen2Moe{{.name = "Qwen2MoeForCausalLM", .configure = configure_qwen2_moe}};

}  // namespace
}  // namespace qlm::models
