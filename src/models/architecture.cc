#include "models/architecture.h"

#include <algorithm>

#include "core/error.h"

namespace qlm::models {

ArchitectureRegistry& ArchitectureRegistry::instance() {
  static ArchitectureRegistry registry;
  return registry;
}

void ArchitectureRegistry::add(Architecture arch) {
  QLM_CHECK(find(arch.name) == nullptr);
  entries_.push_back(std::move(arch));
}

const Architecture* ArchitectureRegistry::find(const std::string& name) const {
  for (const Architecture& a : entries_)
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<std::string> ArchitectureRegistry::names() const {
  std::vector<std::string> out;
  for (const Architecture& a : entries_) out.push_back(a.name);
  std::sort(out.begin(), out.end());
  return out;
}

ModelConfig configure_model(const config::HfConfig& hf) {
  const ArchitectureRegistry& registry = ArchitectureRegistry::instance();
  const std::string supported = fmt::format("{}", fmt::join(registry.names(), ", "));
  if (hf.architectures.empty())
    fail("config.missing_key", {.file = hf.raw.source(), .tensor = {}, .layer = {}},
         fmt::format("add \"architectures\": [\"<one of: {}>\"] to config.json", supported),
         "config.json names no architecture (key \"architectures\" absent or empty)");
  for (const std::string& name : hf.architectures)
    if (const Architecture* arch = registry.find(name)) {
      ModelConfig config = arch->configure(hf);
      config.architecture = name;
      return config;
    }
  fail("model.unknown_architecture", {.file = hf.raw.source(), .tensor = {}, .layer = {}},
       fmt::format("qlm supports: {}", supported), "architecture {} is not supported (expected one of: {})",
       fmt::format("{}", fmt::join(hf.architectures, ", ")), supported);
}

}  // namespace qlm::models
