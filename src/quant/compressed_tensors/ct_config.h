// compressed-tensors quantization config (llm-compressor output; FORMATS.md §2.6): `format`,
// `config_groups` (targets + QuantizationArgs), `ignore` (exact names or `re:` full-match regexes).
// This issue serves the pack-quantized WNA16 scheme (int 4/8-bit weights, group or channel,
// symmetric or not, actorder); every other scheme is rejected at config time naming it.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/compressed_tensors/ct_args.h"
#include "quant/ignore_match.h"
#include "quant/quantization_config.h"
#include "quant/wna16_method.h"

namespace qlm {

class CompressedTensorsConfig final : public QuantizationConfig {
 public:
  static std::unique_ptr<CompressedTensorsConfig> from_json(const io::JsonView& cfg);

  std::string name() const override { return "compressed-tensors"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::F16, DType::BF16}; }
  int min_capability() const override { return 75; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override;

  // The WNA16 scheme of one checkpoint module, nullopt when ignored or targeted by no group.
  std::optional<WNA16Scheme> scheme_for(const std::string& module, LayerInfo::Kind kind) const;

 private:
  struct Group {
    std::string name;
    PatternList targets;  // exact / re: names; class-name targets ("Linear") are matched separately
    std::vector<bool> class_target;
    ct::QuantArgs weights;
    WNA16Scheme scheme;
  };
  std::vector<Group> groups_;
  PatternList ignore_;
  mutable std::atomic<bool> linear_class_used_{false};
};

}  // namespace qlm
