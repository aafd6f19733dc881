#include "layers/fused_moe.h"

#include "quant/moe_method.h"

namespace qlm {

std::string FusedMoESpec::expert_prefix(int64_t e) const { return fmt::format("{}.experts.{}", prefix, e); }
std::string FusedMoESpec::module(int64_t e, const std::string& part) const {
  return fmt::format("{}.{}", expert_prefix(e), part);
}

FusedMoE::FusedMoE(FusedMoESpec spec, const QuantizationConfig* config, const QuantContext& ctx, TpContext tp,
                   LinearSink sink)
    : spec_(std::move(spec)), ctx_(ctx), tp_(tp), sink_(std::move(sink)) {
  const std::string& name = spec_.prefix;
  const ErrorContext where{.file = {}, .tensor = {}, .layer = name};
  if (spec_.num_experts <= 0 || spec_.hidden_size <= 0 || spec_.intermediate_size <= 0)
    fail("layer.spec", where, "check num_experts, hidden_size and moe_intermediate_size in config.json",
         "a fused MoE layer needs positive num_experts, hidden and intermediate sizes (got {}, {}, {})",
         spec_.num_experts, spec_.hidden_size, spec_.intermediate_size);
  if (spec_.top_k < 1 || spec_.top_k > spec_.num_experts)
    fail("layer.spec", where, "set num_experts_per_tok between 1 and num_experts",
         "top-k = {} is not within [1, num_experts = {}]", spec_.top_k, spec_.num_experts);
  if (tp_.size < 1 || tp_.rank < 0 || tp_.rank >= tp_.size)
    fail("layer.tp", where, "", "invalid tensor-parallel rank {} of size {}", tp_.rank, tp_.size);
  if (spec_.intermediate_size % tp_.size != 0)
    fail("layer.tp_divisibility", where, "use a tensor-parallel size that divides the experts' intermediate size",
         "the experts' intermediate size {} is not divisible by the tensor-parallel size {}",
         spec_.intermediate_size, tp_.size);
  I_p_ = spec_.intermediate_size / tp_.size;
  const LayerInfo info{.kind = LayerInfo::Kind::MoE, .prefix = name + ".experts", .shard_prefixes = {},
                       .row_parallel = false};
  try {
    method_ = config ? config->get_moe_method(info, ctx_) : make_expertwise_moe_method(nullptr);
    if (!method_)
      fail("config.unsupported_scheme", {}, "use a checkpoint format with mixture-of-experts support",
           "quantization format '{}' has no method for fused mixture-of-experts layers", config->name());
    method_->create_weights(*this);
  } catch (const Error& e) {
    throw e.with_context(where);
  }
}

void FusedMoE::add_expert(int64_t id, std::unique_ptr<LinearLayer> w13, std::unique_ptr<LinearLayer> w2) {
  QLM_CHECK(w13 && w2 && id >= 0 && id < spec_.num_experts);
  QLM_CHECK(w13->output_size_per_partition() == 2 * I_p_ && w2->input_size_per_partition() == I_p_);
  auto keep = [&](std::unique_ptr<LinearLayer> l) -> LinearLayer* {
    if (sink_) return &sink_(std::move(l));
    owned_.push_back(std::move(l));
    return owned_.back().get();
  };
  Expert e{.id = id, .w13 = nullptr, .w2 = nullptr};
  e.w13 = keep(std::move(w13));
  e.w2 = keep(std::move(w2));
  experts_.push_back(e);
}

void FusedMoE::finalize() {
  if (finalized_) return;
  try {
    method_->process_weights_after_loading(*this);
  } catch (const Error& e) {
    throw e.with_context({.file = {}, .tensor = {}, .layer = prefix()});
  }
  finalized_ = true;
}

Tensor FusedMoE::forward(const Tensor& x, const Tensor& router_logits) {
  if (!x.on_host()) return forward_device(x, router_logits);
  if (router_logits.dim() != 2 || router_logits.size(0) != x.size(0) || router_logits.size(1) != spec_.num_experts ||
      router_logits.dtype() != DType::F32 || !router_logits.on_host())
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "",
         "expects F32 router logits [{}, {}] on the host, got {}", x.size(0), spec_.num_experts, router_logits.str());
  return forward(x, select_experts(router_logits, spec_.top_k, spec_.renormalize));
}

void FusedMoE::check_device_input(const Tensor& x) const {
  if (x.dim() != 2 || x.size(1) != spec_.hidden_size || x.dtype() != ctx_.act_dtype || x.device() != ctx_.device)
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "",
         "expects {}[T, {}] input on {}, got {}", dtype_name(ctx_.act_dtype), spec_.hidden_size, ctx_.device.str(),
         x.str());
}

Tensor FusedMoE::reduced(Tensor y) {
  if (tp_.size > 1 && spec_.reduce_results) {
    if (!tp_.comm)
      fail("layer.no_comm", {.file = {}, .tensor = {}, .layer = prefix()}, "pass a TpContext with a communicator",
           "fused MoE layer at tensor-parallel size {} has no communicator to reduce its results", tp_.size);
    tp_.comm->all_reduce_sum(y);
  }
  return y;
}

Tensor FusedMoE::forward_device(const Tensor& x, const Tensor& router_logits) {
  check_device_input(x);
  const DType lt = router_logits.dtype();
  if (router_logits.dim() != 2 || router_logits.size(0) != x.size(0) || router_logits.size(1) != spec_.num_experts ||
      (lt != DType::F32 && lt != DType::F16 && lt != DType::BF16) || router_logits.device() != ctx_.device)
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "",
         "expects F32, F16 or BF16 router logits [{}, {}] on {}, got {}", x.size(0), spec_.num_experts,
         ctx_.device.str(), router_logits.str());
  if (!finalized_) finalize();
  return reduced(method_->apply_device(*this, x.contiguous(), router_logits.contiguous()));
}

Tensor FusedMoE::forward_router_weight(const Tensor& x, const Tensor& router_weight) {
  check_device_input(x);
  if (router_weight.dim() != 2 || router_weight.size(0) != spec_.num_experts ||
      router_weight.size(1) != spec_.hidden_size || router_weight.dtype() != ctx_.act_dtype ||
      router_weight.device() != ctx_.device || !router_weight.is_contiguous())
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "",
         "expects a contiguous {} router weight [{}, {}] on {}, got {}", dtype_name(ctx_.act_dtype), spec_.num_experts,
         spec_.hidden_size, ctx_.device.str(), router_weight.str());
  if (!finalized_) finalize();
  return reduced(method_->apply_device_router(*this, x.contiguous(), router_weight));
}

Tensor FusedMoE::forward(const Tensor& x, const MoERouting& routing) {
  if (x.dim() != 2 || x.size(1) != spec_.hidden_size || x.dtype() != DType::F32 || !x.on_host())
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "", "expects F32[T, {}] input on the host, got {}",
         spec_.hidden_size, x.str());
  QLM_CHECK(routing.tokens == x.size(0) && routing.num_experts == spec_.num_experts);
  if (!finalized_) finalize();
  return reduced(method_->apply(*this, x.contiguous(), routing));
}

}  // namespace qlm
