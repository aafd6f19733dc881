// Shared linear method of the 8-bit formats: fp8 (`quant_method: fp8`), compressed-tensors
// float-/int-/naive-quantized, and online quantization of float checkpoints. A format supplies a
// W8A8Scheme (numerics and checkpoint names); everything else lives here: parameters in the
// checkpoint layout, fused per-tensor scale handling (FORMATS.md §6), value validation
// (RELIABILITY.md T5/T6), scaled-mm kernel selection and forward.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/scaled_mm.h"
#include "layers/linear.h"
#include "quant/quantization_config.h"
#include "quant/scaled_mm_layer_kernel.h"

namespace qlm {

// What becomes of per-part weight scales of a fused layer (q/k/v, gate/up).
enum class FusedTensorScale : uint8_t {
  RequantizeToMax,  // fp8 / CT W8A8-FP8: every part requantized to the largest scale, one scalar
  Channelwise,      // CT INT8 / W8A16: each part's scale repeated over its rows (a [N] vector)
};

// Online quantization of a float checkpoint at load time (`--quantization fp8|fp8_per_channel|int8`).
enum class OnlineQuant : uint8_t { None, Fp8PerTensor, Fp8PerChannel, Int8PerChannel };
const char* online_quant_name(OnlineQuant q);

struct W8A8Scheme {
  W8Type weight_type = W8Type::Fp8E4M3;
  WeightScaleKind weight_scale = WeightScaleKind::Tensor;
  int64_t block_n = 0, block_k = 0;  // Block
  ActScheme act = ActScheme::DynamicToken;
  bool act_symmetric = true;
  FusedTensorScale fused = FusedTensorScale::RequantizeToMax;
  OnlineQuant online = OnlineQuant::None;
  std::string block_scale_name = "weight_scale";  // fp8 checkpoints: "weight_scale_inv"
  bool channel_scale_1d = false;                  // [N] instead of compressed-tensors' [N, 1]
  std::string describe() const;                   // "fp8_e4m3 w=block(128x128) act=dynamic_token_group(128)"
  friend bool operator==(const W8A8Scheme&, const W8A8Scheme&) = default;
};

class W8A8LinearMethod final : public LinearMethod {
 public:
  W8A8LinearMethod(std::string format, W8A8Scheme scheme);

  std::string name() const override { return format_; }
  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes, int64_t K,
                      int64_t N, DType params_dtype) override;
  void process_weights_after_loading(LinearLayer& layer) override;
  Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) override;
  std::string describe() const override;
  bool uses_meta_device() const override { return scheme_.online != OnlineQuant::None; }

  const W8A8Scheme& scheme() const { return scheme_; }
  const ScaledMMConfig& kernel_config() const { return kernel_.config(); }
  // The standard form handed to the kernel, kept when keep_standard_form(true) (tests, converters).
  void keep_standard_form(bool keep) { keep_ = keep; }
  const std::optional<ScaledMMWeights>& standard_form() const { return kept_; }

 private:
  Tensor take_codes(LinearLayer& layer, Tensor& scale_out);
  Tensor weight_scale_of(LinearLayer& layer, Tensor& codes);
  void static_input(LinearLayer& layer, ScaledMMWeights& w) const;
  std::string format_;
  W8A8Scheme scheme_;
  int64_t K_ = 0, N_ = 0, K_p_ = 0, N_p_ = 0;
  std::vector<int64_t> parts_;
  bool row_parallel_ = false;
  bool replicated_block_grid_ = false;  // block scales loaded whole (unfused layers) and sliced here
  int tp_rank_ = 0;
  ScaledMMLayerKernel kernel_;
  bool keep_ = false;
  std::optional<ScaledMMWeights> kept_;
};

// Errors "weights.scale" (weight scales) / "weights.input_scale" (activation scales) when a value
// is NaN, infinite, zero or negative; `what` names the tensor and position.
void check_positive_scale(float v, const std::string& layer, const std::string& tensor, const std::string& where,
                          bool activation);
// "weights.fp8_nan" when e4m3 codes hold NaN (0x7F / 0xFF), with their count and the first one.
void check_fp8_codes(const Tensor& codes, const std::string& layer, const std::string& tensor);

}  // namespace qlm
