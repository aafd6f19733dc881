// AWQ GEMM linear method (AutoAWQ WQLinear_GEMM, FORMATS.md §3.1, §3.6, §4.4): qweight [K, N/8]
// and qzeros [K/G, N/8] packed along N in the interleaved order [0,2,4,6,1,3,5,7], raw zero points,
// scales [K/G, N]. Converted to the standard form by un-interleaving and repacking along K.
#pragma once

#include "quant/wna16_method.h"

namespace qlm {

class AwqLinearMethod final : public WNA16LinearMethod {
 public:
  explicit AwqLinearMethod(WNA16Scheme scheme);

 private:
  void check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const override;
  void declare_params(LinearLayer& layer, const WNA16Geometry& geo) const override;
  WNA16Weights to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const override;
  const char* g_idx_param() const override { return nullptr; }
};

}  // namespace qlm
