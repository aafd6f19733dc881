// The expertwise MoE method: every expert's w13 (gate|up, merged column-parallel) and w2 (down,
// row-parallel without reduction) are linear projections whose LinearMethod comes from the config's
// get_linear_method on the expert's checkpoint module names, the one scheme-resolution function of
// the format: ignore lists, GPTQ dynamic overrides, compressed-tensors config groups and
// modules_in_block apply to experts as to any linear layer, and every weight format a linear layer
// loads (unquantized, GPTQ / AWQ / compressed-tensors WNA16 with zero points and act-order, FP8
// tensor / channel / block — w13 requantised to one scale per expert, INT8 W8A8, ...) loads per
// expert in its own checkpoint layout and keeps its prepared kernel. The MoE kernel is chosen here,
// at config time, from MoEKernelRegistry for the device. On CUDA the weight-only integer experts
// keep their standard form until the MoE kernel has repacked it; a kernel that runs them from its
// own copy alone (MoEKernel::runs_wna16_experts) gets only that form and the projections build no
// kernel of their own, so the weights are held once.
#pragma once

#include <memory>

#include "layers/fused_moe.h"
#include "quant/quantization_config.h"

namespace qlm {

class ExpertwiseMoEMethod final : public MoEMethod {
 public:
  // config null: unquantized experts.
  explicit ExpertwiseMoEMethod(const QuantizationConfig* config) : config_(config) {}
  std::string name() const override;
  void create_weights(FusedMoE& layer) override;
  void process_weights_after_loading(FusedMoE& layer) override;
  Tensor apply(FusedMoE& layer, const Tensor& x, const MoERouting& routing) override;
  Tensor apply_device(FusedMoE& layer, const Tensor& x, const Tensor& router_logits) override;
  std::string router_fold_obstacle(int64_t tokens) const override;
  Tensor apply_device_router(FusedMoE& layer, const Tensor& x, const Tensor& router_weight) override;
  std::string device_host_wait(int64_t tokens) const override;
  std::string describe() const override;
  const MoEKernelConfig& kernel_config() const { return cfg_; }

 private:
  void require_prepared(const FusedMoE& layer) const;  // quant.not_finalized before process_weights_after_loading
  const QuantizationConfig* config_;
  MoEKernelConfig cfg_;
  std::string kernel_name_;
  std::unique_ptr<MoEKernel> kernel_;  // created with the weights, prepared once they are loaded
  bool prepared_ = false;
};

std::unique_ptr<MoEMethod> make_expertwise_moe_method(const QuantizationConfig* config);

}  // namespace qlm
