// The format registry, config resolution (FORMATS.md §2.1, RELIABILITY.md C2) and the
// QuantizationConfig defaults.
#include <algorithm>
#include <cctype>
#include <iostream>

#include "quant/moe_method.h"
#include "quant/quantization_config.h"

namespace qlm {

std::unique_ptr<MoEMethod> QuantizationConfig::get_moe_method(const LayerInfo&, const QuantContext&) const {
  return make_expertwise_moe_method(this);
}
std::unique_ptr<KVCacheMethod> QuantizationConfig::get_kv_cache_method(const LayerInfo&, const QuantContext&) const {
  return nullptr;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool answers_to(const QuantFormat& f, const std::string& key) {
  if (lower(f.name) == key) return true;
  return std::any_of(f.aliases.begin(), f.aliases.end(), [&](const std::string& a) { return lower(a) == key; });
}

const std::string& family_of(const QuantFormat& f) { return f.family.empty() ? f.name : f.family; }

}  // namespace

QuantRegistry& QuantRegistry::instance() {
  static QuantRegistry registry;
  return registry;
}

void QuantRegistry::add(QuantFormat format) {
  std::vector<std::string> keys{format.name};
  keys.insert(keys.end(), format.aliases.begin(), format.aliases.end());
  for (const std::string& key : keys) {
    const std::string k = lower(key);
    for (auto it = formats_.begin(); it != formats_.end();) {
      if (!answers_to(*it, k)) {
        ++it;
        continue;
      }
      std::string w = fmt::format("quantization format '{}' registered again: the new registration replaces '{}'",
                                  key, it->name);
      std::cerr << "qlm: warning: " << w << "\n";
      warnings_.push_back(std::move(w));
      if (lower(it->name) == k) {
        it = formats_.erase(it);  // the name itself is taken over
      } else {
        std::erase_if(it->aliases, [&](const std::string& a) { return lower(a) == k; });
        ++it;
      }
    }
  }
  formats_.push_back(std::move(format));
}

const QuantFormat* QuantRegistry::find(const std::string& name_or_alias) const {
  const std::string key = lower(name_or_alias);
  for (const QuantFormat& f : formats_)
    if (answers_to(f, key)) return &f;
  return nullptr;
}

std::vector<std::string> QuantRegistry::names() const {
  std::vector<std::string> out;
  for (const QuantFormat& f : formats_) out.push_back(f.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> QuantRegistry::warnings() const { return warnings_; }

namespace {

const QuantFormat& find_or_fail(const std::string& method, const std::string& where) {
  const QuantRegistry& reg = QuantRegistry::instance();
  if (const QuantFormat* f = reg.find(method)) return *f;
  fail("config.unknown_method", {.file = where, .tensor = {}, .layer = {}},
       "use a supported format, or load a plugin that registers it (--quant-plugin / QLM_QUANT_PLUGINS)",
       "unknown quantization method '{}'; registered: {}", method, fmt::join(reg.names(), ", "));
}

}  // namespace

std::unique_ptr<QuantizationConfig> resolve_quantization_config(const std::optional<io::JsonView>& quant_config,
                                                                const std::optional<std::string>& user_override) {
  if (!quant_config && !user_override) return nullptr;
  const QuantFormat* chosen = nullptr;
  io::JsonView view;
  if (quant_config) {
    view = *quant_config;
    const std::string method = view.get_string("quant_method");
    const QuantFormat& ckpt = find_or_fail(method, view.source());
    chosen = &ckpt;
    if (user_override) {
      const QuantFormat& user = find_or_fail(*user_override, "--quantization");
      if (family_of(user) != family_of(ckpt))
        fail("config.override_family", {.file = view.source(), .tensor = {}, .layer = {}},
             fmt::format("drop --quantization, or choose a method of the '{}' family", family_of(ckpt)),
             "--quantization {} (family '{}') does not match the checkpoint's {} = '{}' (family '{}')",
             *user_override, family_of(user), view.key_path("quant_method"), method, family_of(ckpt));
      chosen = &user;
    }
  } else {
    // Online quantization of an unquantized checkpoint: the format builds from an empty config.
    chosen = &find_or_fail(*user_override, "--quantization");
    auto doc = std::make_shared<const nlohmann::json>(nlohmann::json{{"quant_method", chosen->name}});
    view = io::JsonView(doc, "--quantization", "quantization_config");
  }
  if (!chosen->from_config)
    fail("config.unknown_method", {}, "", "quantization format '{}' has no config builder", chosen->name);
  std::unique_ptr<QuantizationConfig> config = chosen->from_config(view);
  QLM_CHECK(config != nullptr);
  return config;
}

}  // namespace qlm
