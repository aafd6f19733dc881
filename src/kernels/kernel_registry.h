// Kernels are chosen per layer at load time, never by a switch inside a layer. Every kernel states
// can_implement(config) -> ok | reason; the selector walks the kernels of one family for the device
// in priority order, after the user's filters, and takes the first that can. When none can, the
// error lists every kernel with its reason. There is no silent fallback.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace qlm {

// User's kernel choices: `--linear-backend NAME` filters every family globally; per-format
// overrides (`linear_backend_per_quant`, e.g. {"gptq": "cpu_ref"}) take precedence for that format.
// A name matches a kernel by its exact name or by its backend (e.g. "cpu_fast" matches
// "cpu_fast_avx512" and "cpu_fast_avx2").
struct KernelPolicy {
  std::string linear_backend = "auto";
  std::map<std::string, std::string> per_quant;
  // The filter that applies to layers of format `quant_name` ("auto" = no filter).
  const std::string& backend_for(const std::string& quant_name) const;
};

// Why each kernel was or was not chosen for one layer (shown by `qlm inspect --plan`).
struct KernelSelection {
  std::string chosen;
  std::vector<std::pair<std::string, std::string>> rejected;  // kernel name, reason
  std::string paths;  // the chosen kernel's code paths by token count (KernelEntry::paths), or empty
  std::string summary() const;  // "cpu_fast_avx512 (rejected: cpu_x: reason; ...)"
};

template <typename Config, typename Kernel>
struct KernelEntry {
  std::string name;     // unique, e.g. "cpu_ref", "cpu_fast_avx512"
  std::string backend;  // family used by --linear-backend, e.g. "cpu_ref", "cpu_fast", "cuda"
  DeviceType device = DeviceType::CPU;
  int priority = 0;  // lower runs first
  // nullopt when the kernel can run `config`, else the reason it cannot.
  std::function<std::optional<std::string>(const Config&)> can_implement;
  std::function<std::unique_ptr<Kernel>(const Config&)> create;
  // Optional: which code path the kernel takes for `config` by the number of tokens M, as ranges
  // ("M 1-8 stream · 9-16 tiled · >= 17 dequant+cuBLAS"); shown by `qlm inspect --plan`.
  std::function<std::string(const Config&)> paths;
};

// One registry per kernel family (dense linear, mixed-precision linear, scaled-mm, ...).
template <typename Config, typename Kernel>
class KernelRegistry {
 public:
  using Entry = KernelEntry<Config, Kernel>;
  static KernelRegistry& instance() {
    static KernelRegistry registry;
    return registry;
  }
  void add(Entry entry) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) { return e.name == entry.name; }),
                   entries_.end());
    entries_.push_back(std::move(entry));
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.priority < b.priority; });
  }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }

  // Chooses a kernel for `config` on `device`. `family` names the kernel family in messages
  // ("mixed-precision linear"); `backend` is the user's filter ("auto" for none); `layer` names
  // the layer for the error.
  std::pair<const Entry*, KernelSelection> select(const Config& config, DeviceType device,
                                                  const std::string& backend, const std::string& family,
                                                  const std::string& layer) const {
    KernelSelection sel;
    bool any_matching_filter = false;
    for (const auto& e : entries_) {
      if (e.device != device) continue;
      if (backend != "auto" && backend != e.name && backend != e.backend) {
        sel.rejected.emplace_back(e.name, "excluded by --linear-backend=" + backend);
        continue;
      }
      any_matching_filter = true;
      if (auto reason = e.can_implement(config)) {
        sel.rejected.emplace_back(e.name, *reason);
        continue;
      }
      sel.chosen = e.name;
      if (e.paths) sel.paths = e.paths(config);
      return {&e, sel};
    }
    std::string reasons;
    // Root causes first: kernels that were eligible but could not implement the layer.
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& [name, why] : sel.rejected) {
        bool filtered = why.rfind("excluded by", 0) == 0;
        if (filtered == (pass == 1)) reasons += fmt::format("\n  - {}: {}", name, why);
      }
    if (!any_matching_filter && backend != "auto")
      fail("kernel.no_backend", ErrorContext{"", "", layer},
           "use --linear-backend auto, or one of the kernels listed",
           "--linear-backend={} was requested but no '{}' kernel exists for {} layers on {}.{}", backend,
           backend, family, device == DeviceType::CPU ? "cpu" : "cuda", reasons);
    fail("kernel.none", ErrorContext{"", "", layer},
         "choose another --linear-backend, another tensor-parallel size, or report the shape",
         "no {} kernel can implement this layer ({}). Reasons:{}", family, config.describe(), reasons);
  }

 private:
  std::vector<Entry> entries_;
};

// Registers a kernel from its own source file: `static KernelRegistrar<Cfg, K> reg{{...}};`
template <typename Config, typename Kernel>
struct KernelRegistrar {
  explicit KernelRegistrar(KernelEntry<Config, Kernel> entry) {
    KernelRegistry<Config, Kernel>::instance().add(std::move(entry));
  }
};

}  // namespace qlm
