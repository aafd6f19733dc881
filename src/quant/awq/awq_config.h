// AWQ quantization config (FORMATS.md §2.4): `bits`/`w_bit` (4 only), `group_size`/`q_group_size`,
// `zero_point` (required; true only), `version` (GEMM only), `modules_to_not_convert` (substring
// match), `lm_head`. Registered as "awq" (alias awq_marlin).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/awq/awq_method.h"
#include "quant/ignore_match.h"
#include "quant/quantization_config.h"

namespace qlm {

class AwqConfig final : public QuantizationConfig {
 public:
  static std::unique_ptr<AwqConfig> from_json(const io::JsonView& cfg);

  std::string name() const override { return "awq"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::F16, DType::BF16}; }
  int min_capability() const override { return 75; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override { return not_convert_.unmatched(); }

  const WNA16Scheme& scheme() const { return scheme_; }

 private:
  WNA16Scheme scheme_;
  bool lm_head_ = false;
  PatternList not_convert_;
};

}  // namespace qlm
