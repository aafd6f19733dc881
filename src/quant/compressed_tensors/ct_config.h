// compressed-tensors quantization config (llm-compressor output; FORMATS.md §2.6): `format`,
// `config_groups` (targets + QuantizationArgs), `ignore` (exact names or `re:` full-match regexes).
// Schemes: pack-quantized WNA16 (int 4/8-bit weights, group or channel, symmetric or not,
// actorder), the 8-bit float-/int-/naive-quantized W8A8 / W8A16 schemes and float4 weight-only NVFP4A16 /
// MXFP4A16 (ct_w8a8.h, quant/fp4_method.h), in the
// dispatch order of FORMATS.md §2.6; every other scheme is rejected at config time naming it.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quant/compressed_tensors/ct_args.h"
#include "quant/compressed_tensors/ct_w8a8.h"
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
  // The k/v scales of every attention layer (quant/kv_cache): compressed-tensors kv_cache_scheme (per tensor or
  // attn_head).
  std::unique_ptr<KVCacheMethod> get_kv_cache_method(const LayerInfo& layer, const QuantContext& ctx) const override;
  std::string describe() const override;
  std::vector<std::string> unmatched_ignore_patterns() const override;

  // The WNA16 scheme of one checkpoint module, nullopt when ignored, targeted by no group, or
  // targeted by an 8-bit group (w8a8_scheme_for).
  std::optional<WNA16Scheme> scheme_for(const std::string& module, LayerInfo::Kind kind) const;
  // The W8A8 / W8A16 scheme of one checkpoint module, nullopt unless an 8-bit group targets it.
  std::optional<W8A8Scheme> w8a8_scheme_for(const std::string& module, LayerInfo::Kind kind) const;
  // Whether kv_cache_scheme asks for an fp8 KV cache with checkpoint scales.
  bool has_kv_cache_scheme() const { return kv_cache_scheme_; }

  // The scheme of a group (exactly one set), for fused-layer resolution.
  struct Scheme {
    std::optional<WNA16Scheme> wna16;
    std::optional<W8A8Scheme> w8a8;
    std::optional<Fp4Scheme> fp4;
    std::string describe() const;  // the set scheme's
    friend bool operator==(const Scheme&, const Scheme&) = default;
  };

 private:
  struct Group {
    std::string name;
    PatternList targets;  // exact / re: names; class-name targets ("Linear") are matched separately
    std::vector<bool> class_target;
    ct::QuantArgs weights;
    Scheme scheme;
    std::string format;
  };
  std::optional<Scheme> resolve(const std::string& module, LayerInfo::Kind kind) const;
  bool kv_cache_scheme_ = false;
  std::vector<Group> groups_;
  PatternList ignore_;
  mutable std::atomic<bool> linear_class_used_{false};
};

}  // namespace qlm
