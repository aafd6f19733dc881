// The fused mixture-of-experts layer (vLLM's FusedMoE, FORMATS.md §8): E experts, each a SiLU-gated
// MLP with w13 = gate|up (column-parallel over the intermediate size) and w2 = down (row-parallel
// over it), and the routed forward: softmax top-k over the router logits (optionally renormalised),
// tokens grouped by expert, one pass per expert over its group, the weighted sum per token, and one
// tensor-parallel reduction for all experts.
//
// Experts are loaded by expert id and shard id straight from the checkpoint names
// "<prefix>.experts.<e>.<gate|up|down>" (Mixtral: w1 / w3 / w2): expert e's w13 is a merged
// column-parallel projection named "<prefix>.experts.<e>.<fused>" whose parts are the gate (shard 0)
// and up (shard 1) checkpoint modules, its w2 a row-parallel projection under the down name. Both
// are registered with the model's ModuleSet through the sink, so the streaming loader, TP slicing of
// every parameter kind, both completeness checks and early finalization work for experts as for any
// linear layer. The layer never knows the format: its MoEMethod (QuantizationConfig::get_moe_method)
// declares the experts and chooses the MoE kernel.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/moe_kernel.h"
#include "layers/linear.h"
#include "parallel/communicator.h"
#include "quant/quantization_config.h"

namespace qlm {

// Checkpoint module names of one expert's projections.
struct MoEExpertNames {
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
  std::string fused = "gate_up_proj";  // the model's module for gate|up (not in the checkpoint)
  static MoEExpertNames mixtral() { return {.gate = "w1", .up = "w3", .down = "w2", .fused = "w13"}; }
};

struct FusedMoESpec {
  std::string prefix;  // module holding the experts, e.g. "model.layers.0.mlp"
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t hidden_size = 0;        // H
  int64_t intermediate_size = 0;  // I of one expert (moe_intermediate_size)
  bool renormalize = false;       // divide the top-k weights by their sum
  // Sum the partial outputs over ranks in forward(); false leaves it to the caller (who may add a
  // shared expert's partial output first and reduce once).
  bool reduce_results = true;
  DType params_dtype = DType::F32;  // dense weights / scales of the experts in the checkpoint
  MoEExpertNames names;
  std::string expert_prefix(int64_t e) const;               // "<prefix>.experts.<e>"
  std::string module(int64_t e, const std::string& part) const;  // "<prefix>.experts.<e>.<part>"
};

class FusedMoE {
 public:
  // Receives each expert projection; returns the layer to use (e.g. ModuleSet::add_linear). Without a
  // sink the FusedMoE owns its expert layers (then the caller loads them through experts()).
  using LinearSink = std::function<LinearLayer&(std::unique_ptr<LinearLayer>)>;

  // Validates the spec (errors name the layer), asks `config` (null = unquantized) for the MoE
  // method, which declares the experts and chooses the kernel.
  FusedMoE(FusedMoESpec spec, const QuantizationConfig* config, const QuantContext& ctx, TpContext tp,
           LinearSink sink = {});
  FusedMoE(const FusedMoE&) = delete;
  FusedMoE& operator=(const FusedMoE&) = delete;

  const FusedMoESpec& spec() const { return spec_; }
  const std::string& prefix() const { return spec_.prefix; }
  const QuantContext& quant_context() const { return ctx_; }
  const TpContext& tp() const { return tp_; }
  int64_t intermediate_size_per_partition() const { return I_p_; }

  struct Expert {
    int64_t id = 0;  // global expert id
    LinearLayer* w13 = nullptr;
    LinearLayer* w2 = nullptr;
  };
  // Called by the method in create_weights, once per local expert in id order.
  void add_expert(int64_t id, std::unique_ptr<LinearLayer> w13, std::unique_ptr<LinearLayer> w2);
  const std::vector<Expert>& experts() const { return experts_; }

  MoEMethod& method() { return *method_; }
  const MoEMethod& method() const { return *method_; }
  KernelSelection kernel_selection;     // set by the method
  std::shared_ptr<void> method_state;   // method-owned

  // After every expert projection is finalized (the loader does that): the method's
  // process_weights_after_loading. forward() calls it when it has not run yet.
  void finalize();
  bool finalized() const { return finalized_; }

  // x [T, H] F32 on the host, router_logits [T, E] F32: the routed experts' output [T, H], summed over
  // ranks when spec.reduce_results (every rank must call it with the same arguments). With x on a
  // device: x in the context's act dtype, logits F32 / F16 / BF16 on the same device, routed there;
  // the output is F32 on the device.
  Tensor forward(const Tensor& x, const Tensor& router_logits);
  // The device forward with the router's weight [E, H] (act dtype, same device) instead of its logits, where
  // router_fold_obstacle(T) is empty: the kernel computes the logits inside its routing (one launch fewer at decode).
  std::string router_fold_obstacle(int64_t tokens) const {
    return finalized_ ? method_->router_fold_obstacle(tokens) : "the MoE layer is not loaded yet";
  }
  bool routes_from_weight(int64_t tokens) const { return router_fold_obstacle(tokens).empty(); }
  Tensor forward_router_weight(const Tensor& x, const Tensor& router_weight);
  // The same with a routing computed elsewhere (tests, other routers).
  Tensor forward(const Tensor& x, const MoERouting& routing);
  // Why the device forward on `tokens` tokens waits for the host (MoEMethod::device_host_wait);
  // empty when a CUDA graph can capture it.
  std::string device_host_wait(int64_t tokens) const { return method_->device_host_wait(tokens); }

 private:
  Tensor forward_device(const Tensor& x, const Tensor& router_logits);
  void check_device_input(const Tensor& x) const;
  Tensor reduced(Tensor y);  // the tensor-parallel sum where spec.reduce_results
  FusedMoESpec spec_;
  QuantContext ctx_;
  TpContext tp_;
  int64_t I_p_ = 0;
  LinearSink sink_;
  std::vector<std::unique_ptr<LinearLayer>> owned_;
  std::vector<Expert> experts_;
  std::unique_ptr<MoEMethod> method_;
  bool finalized_ = false;
};

}  // namespace qlm
