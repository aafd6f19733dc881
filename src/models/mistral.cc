// MistralForCausalLM: Llama without biases; `sliding_window` (null for none) applies to every layer.
#include "models/architecture.h"

namespace qlm::models {
namespace {

ModelConfig configure_mistral(const config::HfConfig& hf) {
  ModelConfig m = llama_family_config(hf, 1e-6);
  if (const auto window = hf.text.opt_int("sliding_window")) {
    if (*window <= 0) hf.text.fail_value("sliding_window", "a positive integer or null");
    m.sliding_window.assign(static_cast<size_t>(m.num_layers), *window);
  }
  return m;
}

const ArchitectureRegistrar kMistral{{.name = "MistralForCausalLM", .configure = configure_mistral}};

}  // namespace
}  // namespace qlm::models
