// GPTQ linear method (AutoGPTQ / GPTQModel checkpoints, FORMATS.md §3.2, §4.4): qweight packed
// sequentially along K, qzeros packed along N, scales, optional g_idx. Already the standard form
// except for the zero points, whose meaning depends on checkpoint_format (v1 stores zero - 1).
#pragma once

#include "quant/wna16_method.h"

namespace qlm {

enum class GptqZeroConvention : uint8_t {
  V1,  // checkpoint_format "gptq": true zero = stored + 1
  V2,  // checkpoint_format "gptq_v2": true zero = stored
};
const char* gptq_zero_convention_name(GptqZeroConvention c);

class GptqLinearMethod final : public WNA16LinearMethod {
 public:
  GptqLinearMethod(WNA16Scheme scheme, GptqZeroConvention convention);

 private:
  void check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const override;
  void declare_params(LinearLayer& layer, const WNA16Geometry& geo) const override;
  WNA16Weights to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const override;
  const char* g_idx_param() const override { return "g_idx"; }
  GptqZeroConvention convention_;
};

}  // namespace qlm
