// compressed-tensors pack-quantized WNA16 linear method (FORMATS.md §3.3, §4.4): weight_packed
// [N, K/P] packed along K (the transpose of GPTQ's qweight), weight_scale [N, G],
// weight_zero_point [N/P, G] packed along N (asymmetric only), weight_g_idx [K] (actorder=group),
// weight_shape [2] = (N, K). Symmetric codes are offset by 2^(b-1) (uint4b8 / uint8b128).
#pragma once

#include "quant/wna16_method.h"

namespace qlm {

class CtWNA16LinearMethod final : public WNA16LinearMethod {
 public:
  explicit CtWNA16LinearMethod(WNA16Scheme scheme);

 private:
  void check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const override;
  void declare_params(LinearLayer& layer, const WNA16Geometry& geo) const override;
  WNA16Weights to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const override;
  const char* g_idx_param() const override { return scheme().act_order ? "weight_g_idx" : nullptr; }
};

}  // namespace qlm
