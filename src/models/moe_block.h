// The mixture-of-experts MLP of one decoder layer: the router (an unquantized replicated linear
// "<block>.gate", as vLLM builds it), the FusedMoE experts, and for Qwen2-MoE the shared expert
// ("<block>.shared_expert.{gate,up,down}_proj", quantized like any MLP) scaled per token by
// sigmoid("<block>.shared_expert_gate" · x). The routed and shared partial outputs are summed before
// the one tensor-parallel reduction.
#pragma once

#include <memory>
#include <string>

#include "layers/fused_moe.h"
#include "loader/module_set.h"
#include "models/checkpoint_dtype.h"
#include "models/model_config.h"

namespace qlm::models {

class MoEBlock {
 public:
  // Declares the router, experts and shared expert of layer `layer` into `modules`.
  MoEBlock(const ModelConfig& config, int64_t layer, const QuantizationConfig* quant, const QuantContext& ctx,
           TpContext tp, const TensorDtypeLookup& dtypes, ModuleSet& modules);
  // After the loader finalized every projection.
  void finish_load() { experts_->finalize(); }
  // h [T, H] (normalised hidden states) -> the MLP output [T, H], reduced over ranks: F32 on the
  // host, or with h on a CUDA device (in the act dtype) F32 on that device (moe_block_cuda.cc).
  Tensor forward(const Tensor& h);
  // Why forward() on `tokens` tokens on a device waits for the host (the routed experts; the router
  // and the shared expert are linear layers, which never wait); empty when a graph can capture it.
  std::string device_host_wait(int64_t tokens) const { return experts_->device_host_wait(tokens); }
  // How the router runs on a device at `tokens` tokens, in words: "folded into the MoE routing kernel", or "its own
  // linear layer (<why not>)".
  std::string router_path(int64_t tokens) const;
  FusedMoE& experts() { return *experts_; }
  const FusedMoE& experts() const { return *experts_; }

 private:
  Tensor forward_device(const Tensor& h);
  // Why the device forward at `tokens` tokens keeps the router apart; empty when the MoE kernel computes it.
  std::string router_fold_obstacle(int64_t tokens) const;
  TpContext tp_;
  LinearLayer* router_ = nullptr;
  std::unique_ptr<FusedMoE> experts_;
  LinearLayer* shared_gate_up_ = nullptr;
  LinearLayer* shared_down_ = nullptr;
  LinearLayer* shared_gate_ = nullptr;
};

}  // namespace qlm::models
