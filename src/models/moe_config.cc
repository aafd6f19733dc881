#include "models/moe_config.h"

#include <algorithm>

#include "core/error.h"

namespace qlm::models {

MoEConfig qwen_moe_config(const config::HfConfig& hf, int64_t num_layers, bool default_norm_topk, bool shared_expert) {
  const io::JsonView& c = hf.text;
  MoEConfig m;
  m.num_experts = c.get_int("num_experts");
  if (m.num_experts < 0) c.fail_value("num_experts", "a non-negative integer");
  m.top_k = c.get_int("num_experts_per_tok");
  if (m.num_experts > 0 && (m.top_k < 1 || m.top_k > m.num_experts))
    c.fail_value("num_experts_per_tok", fmt::format("an integer in [1, num_experts = {}]", m.num_experts));
  m.intermediate_size = c.get_int("moe_intermediate_size");
  if (m.intermediate_size <= 0) c.fail_value("moe_intermediate_size", "a positive integer");
  m.renormalize = c.opt_bool("norm_topk_prob").value_or(default_norm_topk);
  if (shared_expert) {
    m.shared_expert_intermediate_size = c.opt_int("shared_expert_intermediate_size").value_or(0);
    if (m.shared_expert_intermediate_size < 0)
      c.fail_value("shared_expert_intermediate_size", "a non-negative integer");
  }
  const int64_t step = c.opt_int("decoder_sparse_step").value_or(1);
  if (step < 1) c.fail_value("decoder_sparse_step", "a positive integer");
  std::vector<int64_t> dense_only;
  if (c.has("mlp_only_layers") && !c.is_null("mlp_only_layers")) dense_only = c.get_int_list("mlp_only_layers");
  for (int64_t l : dense_only)
    if (l < 0 || l >= num_layers)
      c.fail_value("mlp_only_layers", fmt::format("layer indices in [0, num_hidden_layers = {})", num_layers));
  m.sparse.assign(static_cast<size_t>(num_layers), false);
  for (int64_t l = 0; l < num_layers; ++l)
    m.sparse[static_cast<size_t>(l)] = m.num_experts > 0 && (l + 1) % step == 0 &&
                                       std::find(dense_only.begin(), dense_only.end(), l) == dense_only.end();
  return m;
}

}  // namespace qlm::models
