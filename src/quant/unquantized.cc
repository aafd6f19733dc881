#include "quant/unquantized.h"

#include "kernels/dense_linear.h"
#include "layers/linear.h"

namespace qlm {
namespace {

class UnquantizedLinearMethod final : public LinearMethod {
 public:
  std::string name() const override { return kUnquantizedName; }

  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes,
                      int64_t /*K*/, int64_t /*N*/, DType params_dtype) override {
    const DTypeInfo& info = dtype_info(params_dtype);
    if (!info.is_float || info.bits < 16)
      fail("layer.dtype", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "set torch_dtype to float32, float16 or bfloat16",
           "an unquantized linear layer needs F32, F16 or BF16 weights, got {}", info.name);
    int64_t N_p = 0;
    for (int64_t n : output_partition_sizes) N_p += n;
    Parameter w("weight", ParamKind::Weight, {N_p, K_p}, params_dtype);
    w.input_dim = 1;
    w.output_dim = 0;
    layer.add_param(std::move(w));

    const QuantContext& ctx = layer.quant_context();
    config_ = DenseLinearConfig{.K_p = K_p, .N_p = N_p, .weight_dtype = params_dtype, .act_dtype = ctx.act_dtype,
                                .device = ctx.device, .capability = ctx.capability};
    auto [entry, selection] = DenseKernelRegistry::instance().select(
        config_, ctx.device.type, ctx.kernels.backend_for(kUnquantizedName), "dense linear", layer.prefix());
    entry_ = *entry;  // a copy: later registrations may move registry entries
    layer.kernel_selection = std::move(selection);
  }

  void process_weights_after_loading(LinearLayer& layer) override {
    kernel_ = entry_.create(config_);
    kernel_->prepare(layer.param("weight").data());
  }

  Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) override {
    QLM_CHECK(kernel_ != nullptr);
    Tensor y = allocate_linear_output(x, config_.N_p);
    kernel_->run(x, y, bias);
    return y;
  }

  std::string describe() const override { return fmt::format("dense {}", dtype_name(config_.weight_dtype)); }

  const Tensor* dense_device_weight() const override { return kernel_ ? kernel_->device_weight() : nullptr; }

 private:
  DenseLinearConfig config_;
  DenseKernelRegistry::Entry entry_;
  std::unique_ptr<DenseLinearKernel> kernel_;
};

}  // namespace

std::unique_ptr<LinearMethod> make_unquantized_linear_method() { return std::make_unique<UnquantizedLinearMethod>(); }

}  // namespace qlm
