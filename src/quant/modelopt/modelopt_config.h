// NVIDIA ModelOpt checkpoints (FORMATS.md §2.8, §3.5b). Two spellings of one config:
//   hf_quant_config.json  {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8",
//                          "kv_cache_quant_algo": "FP8" | null, "exclude_modules": [wildcards]}}
//   config.json           quantization_config {"quant_method": "modelopt", "quant_algo": "FP8",
//                          "kv_cache_scheme": {float, 8 bits} | "kv_cache_quant_algo", "ignore": [wildcards]}
// quant_algo FP8 is served: per-tensor fp8 e4m3 `weight` with `weight_scale`, static per-tensor
// `input_scale`, fused parts requantized to their largest scale — the shared W8A8 method and the
// scaled-mm kernels, as for `quant_method: fp8`. Every other quant_algo (NVFP4, FP8_PB_WO, ...)
// is "config.unsupported_scheme" naming it. kv_cache_quant_algo FP8 gives every attention layer a
// KV-cache method that reads the checkpoint's k/v scales.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/ignore_match.h"
#include "quant/quantization_config.h"
#include "quant/w8a8_method.h"

namespace qlm {

class ModelOptConfig final : public QuantizationConfig {
 public:
  static std::unique_ptr<ModelOptConfig> from_json(const io::JsonView& cfg);

  std::string name() const override { return "modelopt"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::BF16, DType::F16}; }
  int min_capability() const override { return 89; }  // fp8 tensor cores (vLLM ModelOptFp8Config)
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  // A KVCacheQuantMethod (fp8 e4m3) for attention layers when kv_cache_quant_algo is FP8, else null.
  std::unique_ptr<KVCacheMethod> get_kv_cache_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override { return excluded_.unmatched(); }

  const std::string& quant_algo() const { return quant_algo_; }
  bool has_kv_cache_scales() const { return kv_fp8_; }
  const W8A8Scheme& scheme() const { return scheme_; }

 private:
  std::string quant_algo_;
  bool kv_fp8_ = false;
  W8A8Scheme scheme_;
  PatternList excluded_;
};

}  // namespace qlm
