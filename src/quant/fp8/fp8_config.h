// `quant_method: fp8` (FORMATS.md §2.5, §3.4, §6): AutoFP8 / HF FineGrainedFP8 / DeepSeek-style
// checkpoints with per-tensor `weight_scale` or block `weight_scale_inv` ([ceil(N/bn), ceil(K/bk)]),
// static (`input_scale`) or dynamic activations, `ignored_layers` (fallback
// `modules_to_not_convert`, exact names). With `--quantization fp8` on a float checkpoint it is
// the online per-tensor method instead.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/ignore_match.h"
#include "quant/quantization_config.h"
#include "quant/w8a8_method.h"

namespace qlm {

class Fp8Config final : public QuantizationConfig {
 public:
  static std::unique_ptr<Fp8Config> from_json(const io::JsonView& cfg);

  std::string name() const override { return "fp8"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::BF16, DType::F16}; }
  int min_capability() const override { return 75; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  // The k/v scales of every attention layer (quant/kv_cache): serialized fp8 checkpoints (vLLM Fp8KVCacheMethod).
  std::unique_ptr<KVCacheMethod> get_kv_cache_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override { return ignored_.unmatched(); }

  bool serialized() const { return serialized_; }
  const W8A8Scheme& scheme() const { return scheme_; }

 private:
  bool serialized_ = true;
  bool static_acts_ = false;
  std::optional<std::pair<int64_t, int64_t>> block_;
  W8A8Scheme scheme_;
  PatternList ignored_;
};

// True when `cfg` is the synthetic config resolve_quantization_config builds for
// `--quantization NAME` on a checkpoint without quantization_config (online quantization).
bool is_online_request(const io::JsonView& cfg);

}  // namespace qlm
