#include <fmt/format.h>

#include <map>

#include "runtime/model.h"

namespace qlm::runtime {

std::string LoadPlan::summary() const {
  std::vector<std::pair<std::string, int>> groups;  // "method → kernel", count; first-seen order
  std::map<std::string, size_t> index;
  for (const LayerPlan& l : layers) {
    const std::string key = fmt::format("{} → {}", l.method, l.kernel);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.emplace_back(key, 0);
    ++groups[it->second].second;
  }
  std::string s;
  for (const auto& [key, count] : groups) s += fmt::format("{}{} ×{}", s.empty() ? "" : ", ", key, count);
  return s;
}

}  // namespace qlm::runtime
