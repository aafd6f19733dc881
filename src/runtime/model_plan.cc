#include "runtime/model_plan.h"

#include "config/hf_config.h"
#include "config/quant_config_source.h"
#include "io/checkpoint.h"
#include "kernels/dense_linear.h"
#include "kernels/mp_linear.h"
#include "kernels/scaled_mm.h"
#include "models/architecture.h"
#include "models/decoder_model.h"
#include "parallel/communicator.h"
#include "quant/quantization_config.h"
#include "runtime/kv_cache_scales.h"

namespace qlm::runtime {
namespace {

template <typename Registry>
bool has_kernel_for(DeviceType device) {
  for (const auto& e : Registry::instance().entries())
    if (e.device == device) return true;
  return false;
}

// Kernel families without any kernel for `device`: a layer of that family cannot be planned there.
std::vector<std::string> empty_families(DeviceType device) {
  std::vector<std::string> out;
  if (!has_kernel_for<DenseKernelRegistry>(device)) out.emplace_back("dense linear");
  if (!has_kernel_for<MPKernelRegistry>(device)) out.emplace_back("mixed-precision linear");
  if (!has_kernel_for<ScaledMMKernelRegistry>(device)) out.emplace_back("scaled-mm (W8A8)");
  return out;
}

}  // namespace

ModelPlan plan_model(const std::filesystem::path& model_dir, const ModelOptions& options, int capability) {
  if (options.tp < 1 || options.tp > 64)
    fail("model.tp", {}, "use a tensor-parallel size of at least 1", "tensor-parallel size {} is invalid", options.tp);
  load_plugins_from_env();
  for (const std::string& plugin : options.quant_plugins) load_quant_plugin(plugin);

  const DType act_dtype = activation_dtype(options);  // the rule Model::load applies
  const config::HfConfig hf = config::HfConfig::load(model_dir);
  const models::ModelConfig config = models::configure_model(hf);
  const std::optional<config::QuantConfigSource> source = config::find_quant_config(model_dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(model_dir);  // headers only
  config::check_quantized_tensors_have_config(source, checkpoint.tensor_names(), model_dir);
  const std::unique_ptr<QuantizationConfig> quant = resolve_quantization_config(
      source ? std::optional<io::JsonView>(source->config) : std::nullopt, options.quantization);

  ModelPlan plan;
  plan.architecture = hf.architectures.empty() ? hf.model_type : hf.architectures.front();
  plan.device = options.device.str();
  plan.tp = options.tp;
  plan.linear_backend = options.kernels.linear_backend;
  plan.quantization = quant ? quant->describe() : "none";
  if (!options.device.is_cpu()) {
    const int minimum = quant ? quant->min_capability() : 0;
    plan.capability = capability > 0 ? capability : minimum;
    if (plan.capability < minimum)
      fail("plan.capability", {.file = model_dir.string(), .tensor = {}, .layer = {}},
           fmt::format("plan for --capability {} or newer", minimum),
           "quantization '{}' needs CUDA compute capability {} or newer; --capability {} was given", quant->name(),
           minimum, capability);
  }
  const DeviceType device = options.device.type;
  const std::vector<std::string> missing = empty_families(device);
  if (missing.size() == 3)
    fail("plan.no_device_kernels", {.file = model_dir.string(), .tensor = {}, .layer = {}},
         device == DeviceType::CUDA ? "plan for --device cpu, or use a build that registers the cuda_* kernels"
                                    : "load a plugin that registers kernels for this device",
         "this build registers no linear kernels for {} (none of the dense, mixed-precision or scaled-mm "
         "families has a {} kernel), so no layer can be planned there",
         options.device.str(), device == DeviceType::CUDA ? "cuda_*" : "cpu_*");
  for (const std::string& family : missing)
    plan.notes.push_back(fmt::format("no {} kernel is registered for {} in this build", family, plan.device));

  const QuantContext ctx{.device = options.device, .capability = plan.capability, .act_dtype = act_dtype,
                         .kernels = options.kernels};
  plan.act_dtype = dtype_name(ctx.act_dtype);
  const models::TensorDtypeLookup dtypes = models::checkpoint_dtypes(checkpoint);
  std::unique_ptr<LocalCommGroup> group;
  if (options.tp > 1) group = std::make_unique<LocalCommGroup>(options.tp);
  const ops::KvEncoding kv{.dtype = kv_storage_dtype(resolve_kv_cache_dtype(options.kv_cache_dtype, quant.get()),
                                                     ctx.act_dtype)};
  for (int r = 0; r < options.tp; ++r) {
    // Every rank is declared (its partition sizes may pick other kernels), then dropped.
    const models::RankOptions rank{.quant = quant.get(), .ctx = ctx,
                                   .tp = group ? group->context(r) : TpContext{}, .kv = kv};
    models::DecoderModel model(config, rank, dtypes);
    plan.ranks.push_back(build_load_plan(model, quant.get()));
  }
  return plan;
}

}  // namespace qlm::runtime
