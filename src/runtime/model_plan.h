// The load plan without the load: which method and kernel every linear layer of every
// tensor-parallel rank gets, and why each other kernel was rejected (`qlm inspect --plan`).
// Building it reads config.json, the quantization config and the safetensors headers, declares
// every layer (parameters allocate on first write, so nothing is allocated) and never reads a
// weight byte. A device need not be present: `--device cuda --capability 90` shows the GPU plan
// on any machine whose build registers CUDA kernels.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace qlm {
class LinearLayer;
class QuantizationConfig;
namespace models {
class DecoderModel;
}
}  // namespace qlm

namespace qlm::runtime {

struct ModelPlan {
  std::string architecture;  // "LlamaForCausalLM"
  std::string device;        // "cpu", "cuda:0"
  int capability = 0;        // CUDA compute capability the plan assumes (0 on CPU)
  std::string act_dtype;     // activation dtype the kernels were asked for
  int tp = 1;
  std::string linear_backend;       // the user's filter ("auto" = none)
  std::string quantization;         // the QuantizationConfig's description, or "none"
  std::vector<LoadPlan> ranks;      // one per rank, layers in model order with lm_head last
  std::vector<std::string> notes;   // e.g. kernel families with no kernel for the device
};

// Throws what Model::load would before reading weights: config.*, model.* (model.act_dtype for
// options.act_dtype as Model::load rules it), checkpoint.* (headers), kernel.none /
// kernel.no_backend (listing every kernel's reason), and "plan.no_device_kernels" when the build
// registers no kernel at all for the requested device. `capability` is used only for CUDA (0 there:
// assume the quantization config's minimum); "plan.capability" when it is below that minimum.
ModelPlan plan_model(const std::filesystem::path& model_dir, const ModelOptions& options, int capability = 0);

// The plan of one built rank (Model::load uses it for rank 0).
LayerPlan plan_layer(const LinearLayer& layer);
LoadPlan build_load_plan(models::DecoderModel& rank, const QuantizationConfig* quant);

}  // namespace qlm::runtime
