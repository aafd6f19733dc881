// Online-only formats: `--quantization fp8_per_channel` (fp8 weights with one scale per output
// channel, dynamic per-token activations) and `--quantization int8` (int8 per-channel weights,
// dynamic per-token int8 activations) on a float checkpoint. (`--quantization fp8`, per-tensor, is
// the fp8 format's online mode.) Every linear layer but the LM head is quantized when its weights
// arrive; the result equals `qlm quantize --to <name>` followed by loading.
#include "quant/fp8/fp8_config.h"
#include "quant/unquantized.h"
#include "quant/w8a8_method.h"

namespace qlm {
namespace {

class OnlineConfig final : public QuantizationConfig {
 public:
  OnlineConfig(std::string name, W8A8Scheme scheme) : name_(std::move(name)), scheme_(std::move(scheme)) {}
  std::string name() const override { return name_; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32, DType::BF16, DType::F16}; }
  int min_capability() const override { return 75; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext&) const override {
    if (layer.kind != LayerInfo::Kind::Linear) return make_unquantized_linear_method();
    return std::make_unique<W8A8LinearMethod>(name_, scheme_);
  }
  std::string describe() const override {
    return fmt::format("{} online ({}, weights quantized at load)", name_, scheme_.describe());
  }

 private:
  std::string name_;
  W8A8Scheme scheme_;
};

std::unique_ptr<QuantizationConfig> make_online(const io::JsonView& cfg, const std::string& name, W8A8Scheme s) {
  if (!is_online_request(cfg))
    cfg.fail_value("quant_method", "a checkpoint format; '" + name + "' is an online method for --quantization",
                   "quantize the checkpoint with `qlm quantize --to " + name +
                       "` (writes a standard format), or pass --quantization " + name +
                       " with a float checkpoint");
  return std::make_unique<OnlineConfig>(name, std::move(s));
}

const QuantFormatRegistrar kFp8PerChannel{QuantFormat{
    .name = "fp8_per_channel",
    .aliases = {},
    .family = "online",
    .config_filenames = {},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return make_online(cfg, "fp8_per_channel",
                         W8A8Scheme{.weight_type = W8Type::Fp8E4M3,
                                    .weight_scale = WeightScaleKind::Channel,
                                    .act = ActScheme::DynamicToken,
                                    .online = OnlineQuant::Fp8PerChannel});
    },
}};

const QuantFormatRegistrar kInt8{QuantFormat{
    .name = "int8",
    .aliases = {"int8_per_channel"},
    .family = "online",
    .config_filenames = {},
    .from_config = [](const io::JsonView& cfg) -> std::unique_ptr<QuantizationConfig> {
      return make_online(cfg, "int8",
                         W8A8Scheme{.weight_type = W8Type::Int8,
                                    .weight_scale = WeightScaleKind::Channel,
                                    .act = ActScheme::DynamicToken,
                                    .online = OnlineQuant::Int8PerChannel});
    },
}};

}  // namespace
}  // namespace qlm
