// Architectures keyed by config.json `architectures`. Each architecture registers itself in its
// own file (llama.cc, mistral.cc, qwen2.cc, qwen3.cc) with a function that turns the Hugging Face
// config into the ModelConfig of the shared Llama-family decoder (decoder_model.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/hf_config.h"
#include "models/model_config.h"

namespace qlm::models {

struct Architecture {
  std::string name;  // as in config.json, e.g. "LlamaForCausalLM"
  std::function<ModelConfig(const config::HfConfig&)> configure;
};

class ArchitectureRegistry {
 public:
  static ArchitectureRegistry& instance();
  void add(Architecture arch);  // a name registered twice is a bug (QLM_CHECK)
  const Architecture* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted

 private:
  std::vector<Architecture> entries_;
};

struct ArchitectureRegistrar {
  explicit ArchitectureRegistrar(Architecture arch) { ArchitectureRegistry::instance().add(std::move(arch)); }
};

// The first entry of config.json `architectures` that is registered, configured. Throws
// "model.unknown_architecture" listing the supported ones (or "config.missing_key" when the
// config names none).
ModelConfig configure_model(const config::HfConfig& hf);

}  // namespace qlm::models
