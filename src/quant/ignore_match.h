// Which modules a quantization config applies to (FORMATS.md §1.5, RELIABILITY.md C6/C7). Every
// spelling of "skip these modules" or "these modules get that scheme" is a PatternList; a fused
// layer (qkv_proj, gate_up_proj) is resolved on the checkpoint names of its parts and must come out
// uniform. Patterns remember whether they ever matched, so a config can warn about the ones that
// matched nothing (usually a typo or a name written against another engine's internal names).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "quant/quantization_config.h"

namespace qlm {

enum class PatternSpelling : uint8_t {
  Substring,     // AWQ `modules_to_not_convert`, GPTQ `modules_in_block_to_quantize`: entry in name
  Exact,         // fp8 `ignored_layers`: entry == name
  ExactOrRegex,  // compressed-tensors `ignore`/`targets`: entry == name, or "re:<regex>" full match
  RegexPrefix,   // GPTQModel `dynamic` keys: python re.match (anchored at the start only)
  Wildcard,      // ModelOpt `exclude_modules` / `ignore`: shell wildcard (fnmatch: *, ?, [set]) over the whole name
};
const char* pattern_spelling_name(PatternSpelling spelling);

class PatternList {
 public:
  PatternList();
  // Compiles regexes up front: an invalid one is "config.regex" naming `field`, the pattern and
  // RE2's reason. `field` is the config key the patterns came from ("ignore", "dynamic", ...).
  PatternList(std::vector<std::string> patterns, PatternSpelling spelling, std::string field);
  ~PatternList();
  PatternList(PatternList&&) noexcept;
  PatternList& operator=(PatternList&&) noexcept;

  bool empty() const;
  size_t size() const;
  const std::vector<std::string>& patterns() const;
  // Index of the first pattern matching `name`, marking it used. Thread-safe.
  std::optional<size_t> first_match(std::string_view name) const;
  bool matches(std::string_view name) const { return first_match(name).has_value(); }
  // Indices of every pattern matching `name`, marking them used.
  std::vector<size_t> all_matches(std::string_view name) const;
  // Whether pattern i has matched a name so far.
  bool used(size_t i) const;
  // Patterns that never matched, as "field: pattern".
  std::vector<std::string> unmatched() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks one regex (RE2 syntax) and throws "config.regex" naming `field` and `pattern` if invalid.
void validate_regex(const std::string& pattern, const std::string& field);

// The checkpoint module names a layer is matched on: its shard prefixes when fused, else its prefix.
std::vector<std::string> checkpoint_names(const LayerInfo& layer);

// Resolves one scheme for a (possibly fused) layer: `resolve` is called on every checkpoint name of
// the layer; all results must be equal, else "config.fused_mismatch" listing each member with
// `describe(scheme)` (RELIABILITY.md C7: a fused layer runs one kernel, so its parts cannot differ).
template <typename Scheme>
Scheme resolve_fused_scheme(const LayerInfo& layer, const std::function<Scheme(const std::string&)>& resolve,
                            const std::function<std::string(const Scheme&)>& describe) {
  const std::vector<std::string> names = checkpoint_names(layer);
  std::vector<Scheme> schemes;
  schemes.reserve(names.size());
  bool uniform = true;
  for (const auto& n : names) {
    schemes.push_back(resolve(n));
    if (!(schemes.back() == schemes.front())) uniform = false;
  }
  if (!uniform) {
    std::string members;
    for (size_t i = 0; i < names.size(); ++i) members += fmt::format("\n  - {}: {}", names[i], describe(schemes[i]));
    fail("config.fused_mismatch", {.file = {}, .tensor = {}, .layer = layer.prefix},
         "make the ignore/target patterns treat every part of the fused layer alike",
         "the parts of fused layer {} resolve to different quantization schemes; all parts of a fused layer must "
         "use the same scheme:{}",
         layer.prefix, members);
  }
  return schemes.front();
}

}  // namespace qlm
