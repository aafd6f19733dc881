#include "kernels/kernel_registry.h"

namespace qlm {

const std::string& KernelPolicy::backend_for(const std::string& quant_name) const {
  auto it = per_quant.find(quant_name);
  return it != per_quant.end() ? it->second : linear_backend;
}

std::string KernelSelection::summary() const {
  std::string s = chosen.empty() ? std::string("(none)") : chosen;
  if (rejected.empty()) return s;
  s += " (rejected: ";
  for (size_t i = 0; i < rejected.size(); ++i)
    s += fmt::format("{}{}: {}", i ? "; " : "", rejected[i].first, rejected[i].second);
  return s + ")";
}

}  // namespace qlm
