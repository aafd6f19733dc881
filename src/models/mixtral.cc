// MixtralForCausalLM: Mistral attention (`sliding_window`, null for none, on every layer) and in every
// layer a routed-expert MLP "block_sparse_moe": router "gate", experts "experts.<e>.w1/w3/w2" (gate /
// up / down) of size intermediate_size, top-k = num_experts_per_tok over num_local_experts, the
// top-k weights always renormalised.
#include "models/architecture.h"

#include "core/error.h"

namespace qlm::models {
namespace {

ModelConfig configure_mixtral(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-5);
  if (const auto window = hf.text.opt_int("sliding_window")) {
    if (*window <= 0) hf.text.fail_value("sliding_window", "a positive integer or null");
    m.sliding_window.assign(static_cast<size_t>(m.num_layers), *window);
  }
  const io::JsonView& c = hf.text;
  MoEConfig& moe = m.moe;
  moe.num_experts = c.get_int("num_local_experts");
  if (moe.num_experts < 1) c.fail_value("num_local_experts", "a positive integer");
  moe.top_k = c.get_int("num_experts_per_tok");
  if (moe.top_k < 1 || moe.top_k > moe.num_experts)
    c.fail_value("num_experts_per_tok", fmt::format("an integer in [1, num_local_experts = {}]", moe.num_experts));
  moe.intermediate_size = m.intermediate_size;
  moe.renormalize = true;
  moe.sparse.assign(static_cast<size_t>(m.num_layers), true);
  moe.block = "block_sparse_moe";
  moe.mixtral_names = true;
  return m;
}

const ArchitectureRegistrar kMixtral{{.name = "MixtralForCausalLM", .configure = configure_mixtral}};

}  // namespace
}  // namespace qlm::models
