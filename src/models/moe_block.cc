#include "models/moe_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runtime/ops/activation.h"

namespace qlm::models {
namespace {

LinearSpec spec_of(std::string prefix, LinearKind kind, int64_t in, int64_t out, DType dtype) {
  LinearSpec s;
  s.prefix = std::move(prefix);
  s.kind = kind;
  s.input_size = in;
  s.output_size = out;
  s.params_dtype = dtype;
  return s;
}

}  // namespace

MoEBlock::MoEBlock(const ModelConfig& c, int64_t layer, const QuantizationConfig* quant, const QuantContext& ctx,
                   TpContext tp, const TensorDtypeLookup& dtypes, ModuleSet& modules)
    : tp_(tp) {
  const MoEConfig& m = c.moe;
  const std::string block = fmt::format("model.layers.{}.{}", layer, m.block);
  const std::string gate = block + ".gate";
  // The router stays unquantized in every format (vLLM builds it without a quant config).
  router_ = &modules.add_linear(
      spec_of(gate, LinearKind::Replicated, c.hidden_size, m.num_experts, linear_params_dtype(dtypes, {gate}, c.dtype)),
      nullptr, ctx, tp);

  FusedMoESpec spec;
  spec.prefix = block;
  spec.num_experts = m.num_experts;
  spec.top_k = m.top_k;
  spec.hidden_size = c.hidden_size;
  spec.intermediate_size = m.intermediate_size;
  spec.renormalize = m.renormalize;
  spec.reduce_results = m.shared_expert_intermediate_size == 0;
  spec.names = m.mixtral_names ? MoEExpertNames::mixtral() : MoEExpertNames{};
  spec.params_dtype =
      linear_params_dtype(dtypes, {spec.module(0, spec.names.gate), spec.module(0, spec.names.down)}, c.dtype);
  // Checkpoint gate / up modules of an expert go to its fused w13 (Qwen names are the Llama ones).
  for (const StackedParam& s : {StackedParam{"." + spec.names.gate, "." + spec.names.fused, ShardId::at(0)},
                                StackedParam{"." + spec.names.up, "." + spec.names.fused, ShardId::at(1)}}) {
    const auto& known = modules.stacked();
    if (std::none_of(known.begin(), known.end(), [&](const StackedParam& k) { return k.part == s.part && k.fused == s.fused; }))
      modules.add_stacked(s);
  }
  experts_ = std::make_unique<FusedMoE>(std::move(spec), quant, ctx, tp,
                                        [&modules](std::unique_ptr<LinearLayer> l) -> LinearLayer& {
                                          return modules.add_linear(std::move(l));
                                        });

  if (m.shared_expert_intermediate_size > 0) {
    const std::string se = block + ".shared_expert.";
    const int64_t I = m.shared_expert_intermediate_size;
    const DType dt = linear_params_dtype(dtypes, {se + "gate_proj", se + "down_proj"}, c.dtype);
    LinearSpec gu = spec_of(se + "gate_up_proj", LinearKind::MergedColumn, c.hidden_size, 0, dt);
    gu.output_sizes = {I, I};
    gu.shard_prefixes = {se + "gate_proj", se + "up_proj"};
    shared_gate_up_ = &modules.add_linear(std::move(gu), quant, ctx, tp);
    LinearSpec down = spec_of(se + "down_proj", LinearKind::Row, I, c.hidden_size, dt);
    down.reduce_results = false;  // reduced together with the routed experts
    shared_down_ = &modules.add_linear(std::move(down), quant, ctx, tp);
    const std::string sg = block + ".shared_expert_gate";
    shared_gate_ = &modules.add_linear(
        spec_of(sg, LinearKind::Replicated, c.hidden_size, 1, linear_params_dtype(dtypes, {sg}, c.dtype)), nullptr, ctx,
        tp);
  }
}

Tensor MoEBlock::forward(const Tensor& h) {
  if (!h.on_host()) return forward_device(h);
  Tensor y = experts_->forward(h, router_->forward(h));
  if (!shared_gate_up_) return y;
  const int64_t T = h.size(0), H = h.size(1);
  const Tensor gate_up = shared_gate_up_->forward(h);
  const int64_t width = gate_up.size(1) / 2;
  Tensor act = Tensor::empty({T, width}, DType::F32);
  ops::silu_and_mul(gate_up.data<float>(), act.data<float>(), T, width);
  const Tensor shared = shared_down_->forward(act).contiguous();
  const Tensor g = shared_gate_->forward(h).contiguous();
  float* out = y.data<float>();
  for (int64_t t = 0; t < T; ++t) {
    const float s = 1.0f / (1.0f + std::exp(-g.data<float>()[t]));
    const float* src = shared.data<float>() + t * H;
    for (int64_t i = 0; i < H; ++i) out[t * H + i] += s * src[i];
  }
  if (tp_.size > 1) tp_.comm->all_reduce_sum(y);
  return y;
}

std::string MoEBlock::router_fold_obstacle(int64_t tokens) const {
  if (router_->dense_device_weight() == nullptr) return "its weight is not kept as a plain device tensor";
  if (router_->find_param("bias") != nullptr) return "it has a bias";
  return experts_->router_fold_obstacle(tokens);
}

std::string MoEBlock::router_path(int64_t tokens) const {
  const std::string why = router_fold_obstacle(tokens);
  return why.empty() ? "folded into the MoE routing kernel" : fmt::format("its own linear layer ({})", why);
}

}  // namespace qlm::models
