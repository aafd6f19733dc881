// An out-of-tree quantization format, built as a plugin against the public qlm API
// (docs/plugins.md). "my_quant": int8 weights with one symmetric scale per output channel,
//   W[n, k] = weight_int8[n, k] * weight_scale[n],
// dequantized once after loading and run by whichever dense kernel the selector picks.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dense_linear.h"
#include "layers/linear.h"
#include "quant/quantization_config.h"
#include "quant/unquantized.h"

namespace my_quant {

using namespace qlm;

constexpr const char* kName = "my_quant";

class MyQuantLinearMethod final : public LinearMethod {
 public:
  std::string name() const override { return kName; }

  // Parameters in the checkpoint's layout; the layer shards them (FORMATS.md §4.4): the weight
  // like a dense weight, the per-channel scale along N only.
  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes,
                      int64_t /*K*/, int64_t /*N*/, DType /*params_dtype*/) override {
    int64_t N_p = 0;
    for (int64_t n : output_partition_sizes) N_p += n;
    Parameter w("weight_int8", ParamKind::Weight, {N_p, K_p}, DType::I8);
    w.input_dim = 1;
    w.output_dim = 0;
    layer.add_param(std::move(w));
    Parameter s("weight_scale", ParamKind::ChannelScale, {N_p}, DType::F32);  // f16/bf16 on disk are widened
    s.output_dim = 0;
    layer.add_param(std::move(s));

    const QuantContext& ctx = layer.quant_context();
    config_ = DenseLinearConfig{.K_p = K_p, .N_p = N_p, .weight_dtype = DType::F32, .act_dtype = ctx.act_dtype,
                                .device = ctx.device, .capability = ctx.capability};
    auto [entry, selection] = DenseKernelRegistry::instance().select(
        config_, ctx.device.type, ctx.kernels.backend_for(kName), "dense linear", layer.prefix());
    entry_ = *entry;
    layer.kernel_selection = std::move(selection);
  }

  void process_weights_after_loading(LinearLayer& layer) override {
    const Tensor& q = layer.param("weight_int8").data();
    const Tensor& s = layer.param("weight_scale").data();
    Tensor w = Tensor::empty({config_.N_p, config_.K_p}, DType::F32);
    const int8_t* qp = q.data<int8_t>();
    const float* sp = s.data<float>();
    float* wp = w.data<float>();
    for (int64_t n = 0; n < config_.N_p; ++n) {
      if (!(sp[n] > 0.0f) || sp[n] == std::numeric_limits<float>::infinity())
        fail("my_quant.scale", {.file = {}, .tensor = "weight_scale", .layer = layer.prefix()},
             "re-export the checkpoint", "weight_scale[{}] = {} is not a positive finite number", n, sp[n]);
      for (int64_t k = 0; k < config_.K_p; ++k) wp[n * config_.K_p + k] = static_cast<float>(qp[n * config_.K_p + k]) * sp[n];
    }
    kernel_ = entry_.create(config_);
    kernel_->prepare(w);
  }

  Tensor apply(LinearLayer&, const Tensor& x, const Tensor* bias) override {
    Tensor y = Tensor::empty({x.size(0), config_.N_p}, DType::F32);
    kernel_->run(x, y, bias);
    return y;
  }

  std::string describe() const override { return "int8 per-channel symmetric"; }

 private:
  DenseLinearConfig config_;
  DenseKernelRegistry::Entry entry_;
  std::unique_ptr<DenseLinearKernel> kernel_;
};

class MyQuantConfig final : public QuantizationConfig {
 public:
  explicit MyQuantConfig(std::vector<std::string> ignore) : ignore_(std::move(ignore)) {}
  std::string name() const override { return kName; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32}; }
  int min_capability() const override { return 0; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext&) const override {
    for (const std::string& skip : ignore_)
      if (layer.prefix == skip) return make_unquantized_linear_method();
    if (layer.kind == LayerInfo::Kind::LmHead) return make_unquantized_linear_method();
    return std::make_unique<MyQuantLinearMethod>();
  }
  std::string describe() const override { return "my_quant int8 per-channel"; }

 private:
  std::vector<std::string> ignore_;
};

}  // namespace my_quant

// Called by load_quant_plugin after dlopen. (Registering from a static initialiser works too.)
extern "C" void qlm_register_plugin() {
  qlm::QuantRegistry::instance().add(qlm::QuantFormat{
      .name = my_quant::kName,
      .aliases = {"my-quant"},
      .family = my_quant::kName,
      .config_filenames = {},
      .from_config = [](const qlm::io::JsonView& cfg) -> std::unique_ptr<qlm::QuantizationConfig> {
        return std::make_unique<my_quant::MyQuantConfig>(cfg.opt_string_list("ignore").value_or(std::vector<std::string>{}));
      },
  });
}
