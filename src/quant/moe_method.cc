#include "quant/moe_method.h"

#include <algorithm>

#include "quant/wna16_method.h"

namespace qlm {

Tensor MoEMethod::apply_device(FusedMoE& layer, const Tensor& x, const Tensor&) {
  fail("kernel.device", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "run this model with --device cpu",
       "MoE method {} has no device path (input on {})", name(), x.device().str());
}

std::string MoEMethod::router_fold_obstacle(int64_t) const {
  return fmt::format("MoE method {} does not compute the router", name());
}

Tensor MoEMethod::apply_device_router(FusedMoE& layer, const Tensor& x, const Tensor&) {
  fail("kernel.device", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "pass the router's logits",
       "MoE method {} does not route from the router's weight ({} tokens)", name(), x.size(0));
}

std::string MoEMethod::device_host_wait(int64_t) const {
  return fmt::format("MoE method {} does not say that its device path avoids host waits", name());
}

namespace {
// The experts' weight-only integer methods (null when a projection is in another format).
WNA16LinearMethod* wna16_method(LinearLayer* l) { return dynamic_cast<WNA16LinearMethod*>(&l->method()); }
}  // namespace

std::unique_ptr<MoEMethod> make_expertwise_moe_method(const QuantizationConfig* config) {
  return std::make_unique<ExpertwiseMoEMethod>(config);
}

std::string ExpertwiseMoEMethod::name() const { return config_ ? config_->name() : "unquantized"; }

std::string ExpertwiseMoEMethod::describe() const {
  std::string s = fmt::format("{} experts w13 [{}] w2 [{}]", cfg_.num_experts, cfg_.w13_scheme, cfg_.w2_scheme);
  if (!kernel_name_.empty()) s += fmt::format(" [{}]", kernel_name_);
  return s;
}

void ExpertwiseMoEMethod::create_weights(FusedMoE& layer) {
  const FusedMoESpec& s = layer.spec();
  const QuantContext& ctx = layer.quant_context();
  std::string w13_scheme, w2_scheme;
  bool uniform = true;
  for (int64_t e = 0; e < s.num_experts; ++e) {
    LinearSpec w13;
    w13.prefix = s.module(e, s.names.fused);
    w13.kind = LinearKind::MergedColumn;
    w13.input_size = s.hidden_size;
    w13.output_sizes = {s.intermediate_size, s.intermediate_size};
    w13.params_dtype = s.params_dtype;
    w13.shard_prefixes = {s.module(e, s.names.gate), s.module(e, s.names.up)};
    LinearSpec w2;
    w2.prefix = s.module(e, s.names.down);
    w2.kind = LinearKind::Row;
    w2.input_size = s.intermediate_size;
    w2.output_size = s.hidden_size;
    w2.params_dtype = s.params_dtype;
    w2.reduce_results = false;  // one reduction for all experts, in FusedMoE::forward
    auto a = std::make_unique<LinearLayer>(std::move(w13), config_, ctx, layer.tp());
    auto b = std::make_unique<LinearLayer>(std::move(w2), config_, ctx, layer.tp());
    const std::string da = a->method().describe(), db = b->method().describe();
    if (e == 0) {
      w13_scheme = da;
      w2_scheme = db;
    } else if (da != w13_scheme || db != w2_scheme) {
      uniform = false;
    }
    layer.add_expert(e, std::move(a), std::move(b));
  }
  cfg_ = MoEKernelConfig{};
  cfg_.num_experts = s.num_experts;
  cfg_.local_experts = static_cast<int64_t>(layer.experts().size());
  cfg_.top_k = s.top_k;
  cfg_.hidden_size = s.hidden_size;
  cfg_.intermediate_size = s.intermediate_size;
  cfg_.intermediate_per_partition = layer.intermediate_size_per_partition();
  cfg_.format = name();
  cfg_.uniform_experts = uniform;
  cfg_.w13_scheme = uniform ? w13_scheme : "mixed";
  cfg_.w2_scheme = uniform ? w2_scheme : "mixed";
  cfg_.renormalize = s.renormalize;
  cfg_.act_dtype = ctx.act_dtype;
  cfg_.device = ctx.device;
  cfg_.capability = ctx.capability;

  const MoEKernelRegistry& registry = MoEKernelRegistry::instance();
  const bool any = std::any_of(registry.entries().begin(), registry.entries().end(),
                               [&](const auto& e) { return e.device == ctx.device.type; });
  if (!any)
    fail("kernel.none", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         "run mixture-of-experts models on the CPU (--device cpu) until a grouped MoE kernel exists for this device",
         "no fused-MoE kernel is registered for {} ({})", ctx.device.str(), cfg_.describe());
  // The linear-backend filter applies to the experts' projections, not to the MoE kernel.
  auto [entry, selection] = registry.select(cfg_, ctx.device.type, "auto", "fused-MoE", layer.prefix());
  layer.kernel_selection = selection;
  kernel_name_ = entry->name;
  kernel_ = entry->create(cfg_);
  // A device kernel may repack weight-only integer experts into its own layout: keep their standard
  // form until prepare() (released there). One that runs them from that layout alone at every batch
  // size gets only the standard form: the projections build no kernel, the weights are held once.
  if (!ctx.device.is_cpu()) {
    const bool all_wna16 = std::all_of(layer.experts().begin(), layer.experts().end(), [](const FusedMoE::Expert& e) {
      return wna16_method(e.w13) != nullptr && wna16_method(e.w2) != nullptr;
    });
    const bool kernel_only = all_wna16 && kernel_->runs_wna16_experts();
    if (kernel_only)  // no linear kernel runs them: their schemes without one ("gptq uint4b8 g128", not "... [cuda_x]")
      for (std::string* scheme : {&cfg_.w13_scheme, &cfg_.w2_scheme})
        if (const size_t bracket = scheme->find(" ["); bracket != std::string::npos) scheme->resize(bracket);
    for (const FusedMoE::Expert& e : layer.experts())
      for (LinearLayer* l : {e.w13, e.w2})
        if (WNA16LinearMethod* m = wna16_method(l)) {
          if (kernel_only) {
            m->standard_form_only(true);
            // The plan shows where the weights run; the linear kernel's per-token paths do not apply to them.
            l->kernel_selection.chosen = kernel_name_;
            l->kernel_selection.paths = "with the layer's other experts, grouped by " + kernel_name_;
          } else {
            m->keep_standard_form(true);
          }
        }
  }
}

void ExpertwiseMoEMethod::process_weights_after_loading(FusedMoE& layer) {
  std::vector<MoEExpertOps> ops;
  for (const FusedMoE::Expert& e : layer.experts()) {
    for (LinearLayer* l : {e.w13, e.w2})
      if (!l->finalized())
        fail("loader.incomplete", {.file = {}, .tensor = {}, .layer = l->prefix()},
             "load the checkpoint (every expert's tensors) before running the MoE layer",
             "expert {} projection {} is not loaded and finalized", e.id, l->prefix());
    LinearLayer* w13 = e.w13;
    LinearLayer* w2 = e.w2;
    auto standard = [](LinearLayer* l) -> const WNA16Weights* {
      const WNA16LinearMethod* m = wna16_method(l);
      return m && m->standard_form() ? &*m->standard_form() : nullptr;
    };
    ops.push_back(MoEExpertOps{.id = e.id,
                               .w13 = [w13](const Tensor& x) { return w13->forward(x); },
                               .w2 = [w2](const Tensor& x) { return w2->forward(x); },
                               .w13_wna16 = standard(w13),
                               .w2_wna16 = standard(w2)});
  }
  QLM_CHECK(kernel_ != nullptr);  // created in create_weights
  kernel_->prepare(std::move(ops));
  prepared_ = true;
  for (const FusedMoE::Expert& e : layer.experts())
    for (LinearLayer* l : {e.w13, e.w2})
      if (WNA16LinearMethod* m = wna16_method(l)) {
        m->keep_standard_form(false);
        m->release_standard_form();
      }
}

void ExpertwiseMoEMethod::require_prepared(const FusedMoE& layer) const {
  if (!prepared_)
    fail("quant.not_finalized", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         "call finalize() after loading every tensor", "MoE layer {} ran forward before process_weights_after_loading",
         layer.prefix());
}

Tensor ExpertwiseMoEMethod::apply(FusedMoE& layer, const Tensor& x, const MoERouting& routing) {
  require_prepared(layer);
  Tensor y = Tensor::zeros({x.size(0), layer.spec().hidden_size}, DType::F32);
  kernel_->run(x, routing, y);
  return y;
}

Tensor ExpertwiseMoEMethod::apply_device(FusedMoE& layer, const Tensor& x, const Tensor& router_logits) {
  require_prepared(layer);
  return kernel_->run_device(x, router_logits);
}

std::string ExpertwiseMoEMethod::router_fold_obstacle(int64_t tokens) const {
  if (!prepared_ || !kernel_) return "the MoE layer is not loaded yet";
  return kernel_->router_fold_obstacle(tokens);
}

Tensor ExpertwiseMoEMethod::apply_device_router(FusedMoE& layer, const Tensor& x, const Tensor& router_weight) {
  require_prepared(layer);
  return kernel_->run_device_router(x, router_weight);
}

std::string ExpertwiseMoEMethod::device_host_wait(int64_t tokens) const {
  if (!kernel_) return "its MoE kernel is not created yet";
  return kernel_->device_host_wait(tokens);
}

}  // namespace qlm
