// GPTQ quantization config (FORMATS.md §2.3): `bits`, `group_size`, `desc_act`, `sym` (required),
// `checkpoint_format`/`format` (gptq = v1 zeros, gptq_v2), `lm_head`, GPTQModel `dynamic`
// per-module overrides and `modules_in_block_to_quantize`. Registered as "gptq" (aliases
// gptq_marlin, auto_gptq). Unlike current vLLM, 2/3-bit and asymmetric checkpoints are supported.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/gptq/gptq_method.h"
#include "quant/ignore_match.h"
#include "quant/quantization_config.h"

namespace qlm {

class GptqConfig final : public QuantizationConfig {
 public:
  static std::unique_ptr<GptqConfig> from_json(const io::JsonView& cfg);

  std::string name() const override { return "gptq"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::F16, DType::BF16}; }
  int min_capability() const override { return 75; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override;

  // The scheme of one checkpoint module, nullopt when it stays unquantized.
  std::optional<WNA16Scheme> scheme_for(const std::string& module, LayerInfo::Kind kind) const;
  const WNA16Scheme& base_scheme() const { return base_; }
  GptqZeroConvention convention() const { return convention_; }

 private:
  struct DynamicRule {
    bool skip = false;  // "-:" prefix: module is not quantized
    WNA16Scheme scheme;
  };
  WNA16Scheme base_;
  GptqZeroConvention convention_ = GptqZeroConvention::V1;
  bool lm_head_ = false;
  PatternList dynamic_;  // keys without their +:/-: prefix, python re.match semantics
  std::vector<DynamicRule> rules_;
  std::optional<PatternList> modules_in_block_;
};

}  // namespace qlm
