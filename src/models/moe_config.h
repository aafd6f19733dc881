// The mixture-of-experts part of a model's config (Mixtral, Qwen2-MoE, Qwen3-MoE): which layers have
// a routed-expert MLP, its sizes and routing, the shared expert, and the checkpoint names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/hf_config.h"

namespace qlm::models {

struct MoEConfig {
  int64_t num_experts = 0;  // 0: a dense model
  int64_t top_k = 0;        // num_experts_per_tok
  int64_t intermediate_size = 0;  // of one expert (moe_intermediate_size; Mixtral: intermediate_size)
  bool renormalize = false;       // Mixtral always; Qwen norm_topk_prob
  // Qwen2-MoE: a shared expert MLP of this size on every token, scaled by sigmoid(shared_expert_gate · x).
  int64_t shared_expert_intermediate_size = 0;
  std::vector<bool> sparse;  // per layer: routed experts (else the dense MLP of ModelConfig::intermediate_size)
  std::string block = "mlp";  // the MoE module in a layer: "mlp" (Qwen) or "block_sparse_moe" (Mixtral)
  bool mixtral_names = false;  // experts' w1 / w3 / w2 instead of gate_proj / up_proj / down_proj
  bool enabled() const { return num_experts > 0; }
  bool is_sparse(int64_t layer) const {
    return enabled() && layer >= 0 && layer < static_cast<int64_t>(sparse.size()) && sparse[static_cast<size_t>(layer)];
  }
};

// Qwen2-MoE / Qwen3-MoE: num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob
// (default `default_norm_topk`), decoder_sparse_step, mlp_only_layers, and for Qwen2-MoE
// shared_expert_intermediate_size. Errors name the key.
MoEConfig qwen_moe_config(const config::HfConfig& hf, int64_t num_layers, bool default_norm_topk, bool shared_expert);

}  // namespace qlm::models
