// Quantization plugins: shared libraries that register formats and kernels through the same API
// as the built-ins (docs/plugins.md).
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "quant/quantization_config.h"

namespace qlm {

void load_quant_plugin(const std::string& path) {
  static std::mutex mutex;
  static std::set<void*> loaded;
  std::lock_guard lock(mutex);
  dlerror();
  // RTLD_GLOBAL: a plugin's own dependants (and later plugins) resolve its symbols.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* why = dlerror();
    fail("plugin.load", {.file = path, .tensor = {}, .layer = {}},
         "check the path and that the plugin was built against this qlm (same compiler and libqlm.so)",
         "cannot load quantization plugin: {}", why ? why : "unknown dlopen error");
  }
  if (!loaded.insert(handle).second) return;  // already loaded: its registrations are in place
  using RegisterFn = void (*)();
  if (auto fn = reinterpret_cast<RegisterFn>(dlsym(handle, "qlm_register_plugin"))) fn();
  // Plugins stay loaded for the life of the process: registries hold their code.
}

void load_plugins_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* list = std::getenv("QLM_QUANT_PLUGINS");
    if (!list) return;
    std::string s(list);
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) load_quant_plugin(s.substr(start, end - start));
      start = end + 1;
    }
  });
}

}  // namespace qlm
