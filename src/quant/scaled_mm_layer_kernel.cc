#include "quant/scaled_mm_layer_kernel.h"

namespace qlm {

void ScaledMMLayerKernel::choose(LinearLayer& layer, const ScaledMMConfig& cfg, const std::string& format,
                                 const char* what) {
  const QuantContext& ctx = layer.quant_context();
  cfg_ = cfg;
  cfg_.act_dtype = ctx.act_dtype;
  cfg_.device = ctx.device;
  cfg_.capability = ctx.capability;
  auto [entry, selection] = ScaledMMKernelRegistry::instance().select(
      cfg_, ctx.device.type, ctx.kernels.backend_for(format), what, layer.prefix());
  layer.kernel_selection = selection;
  name_ = entry->name;
}

void ScaledMMLayerKernel::prepare(ScaledMMWeights weights) {
  const auto* entry = ScaledMMKernelRegistry::instance().find(name_);
  QLM_CHECK(entry != nullptr);
  kernel_ = entry->create(cfg_);
  kernel_->prepare(std::move(weights));
}

Tensor ScaledMMLayerKernel::run(const LinearLayer& layer, const Tensor& x, const Tensor* bias) const {
  if (!kernel_)
    fail("quant.not_finalized", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         "call finalize() after loading every tensor", "layer {} ran forward before process_weights_after_loading",
         layer.prefix());
  Tensor in = x.contiguous();
  Tensor y = allocate_linear_output(in, cfg_.N_p);
  kernel_->run(in, y, bias);
  return y;
}

}  // namespace qlm
