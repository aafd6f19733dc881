// The scaled-mm kernel of one linear layer, shared by the methods whose weights end in the scaled-mm standard form
// (kernels/scaled_mm.h): W8A8LinearMethod (FP8 / INT8) and Fp4LinearMethod (float4 weight-only). Chosen in
// create_weights from the layer's context, built and prepared once the standard form exists, run by apply.
#pragma once

#include <memory>
#include <string>

#include "kernels/scaled_mm.h"
#include "layers/linear.h"

namespace qlm {

class ScaledMMLayerKernel {
 public:
  // Chooses the kernel for `cfg` (its numerics and shapes; act_dtype, device and capability come from the layer's
  // context) among those the context's --linear-backend allows for `format` (records layer.kernel_selection;
  // `what` names the layer kind in errors).
  void choose(LinearLayer& layer, const ScaledMMConfig& cfg, const std::string& format, const char* what);
  // Builds the chosen kernel and hands it the weights.
  void prepare(ScaledMMWeights weights);
  // y [M, N_p] = x · Wᵀ (+ bias); "quant.not_finalized" before prepare.
  Tensor run(const LinearLayer& layer, const Tensor& x, const Tensor* bias) const;

  const ScaledMMConfig& config() const { return cfg_; }
  const std::string& name() const { return name_; }

 private:
  ScaledMMConfig cfg_;
  std::string name_;
  std::unique_ptr<ScaledMMKernel> kernel_;
};

}  // namespace qlm
