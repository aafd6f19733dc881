// What the Llama-family decoder needs from config.json, resolved once: sizes, norms, rotary
// embedding, biases and per-layer attention windows. Each architecture (architecture.h) fills the
// parts that differ between families.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/hf_config.h"
#include "core/dtype.h"
#include "models/moe_config.h"
#include "runtime/ops/rope.h"

namespace qlm::models {

struct ModelConfig {
  std::string architecture;  // the registry name that built it, e.g. "Qwen2ForCausalLM"
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  ops::RopeParams rope;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;   // q/k/v projections
  bool o_bias = false;     // o_proj
  bool mlp_bias = false;   // gate/up/down
  bool qk_norm = false;    // RMSNorm over head_dim on q and k before rotary (Qwen3)
  // Per layer: attention window in tokens, 0 for full causal attention.
  std::vector<int64_t> sliding_window;
  // torch_dtype/dtype of config.json (F32 when absent): the dtype of dense tensors when the
  // checkpoint itself does not say.
  DType dtype = DType::F32;
  // Routed-expert MLPs (Mixtral, Qwen2-MoE, Qwen3-MoE); disabled for dense models.
  MoEConfig moe;
};

// The fields shared by every Llama-family architecture: sizes, eps (default `default_eps`), rope
// (rope_theta, rope_scaling types default/linear/dynamic/llama3, partial_rotary_factor, head_dim),
// tie_word_embeddings, dtype. Biases, q/k norms and windows stay off for the architecture to set.
// Throws "config.missing_key" / "config.value" / "config.unsupported" naming the key.
ModelConfig llama_family_config(const config::HfConfig& hf, double default_eps);

// Sliding windows from `layer_types` ("sliding_attention" / "full_attention") and `sliding_window`,
// as Qwen2/Qwen3 configs write them; every layer full when sliding_window is null.
std::vector<int64_t> windows_from_layer_types(const config::HfConfig& hf, int64_t num_layers);

}  // namespace qlm::models
