#include "quant/ignore_match.h"

#include <fnmatch.h>
#include <re2/re2.h>

#include <atomic>

namespace qlm {
namespace {

constexpr std::string_view kRegexPrefix = "re:";

std::unique_ptr<RE2> compile(const std::string& pattern, const std::string& field) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, options);
  if (!re->ok())
    fail("config.regex", {}, "fix the regular expression (RE2 syntax, as in Python's re without look-around)",
         "{}: invalid regular expression '{}': {}", field, pattern, re->error());
  return re;
}

}  // namespace

const char* pattern_spelling_name(PatternSpelling spelling) {
  switch (spelling) {
    case PatternSpelling::Substring: return "substring";
    case PatternSpelling::Exact: return "exact";
    case PatternSpelling::ExactOrRegex: return "exact or re:regex";
    case PatternSpelling::RegexPrefix: return "regex (match at start)";
    case PatternSpelling::Wildcard: return "wildcard";
  }
  return "?";
}

struct PatternList::Impl {
  std::vector<std::string> patterns;
  PatternSpelling spelling = PatternSpelling::Exact;
  std::string field;
  std::vector<std::unique_ptr<RE2>> regexes;  // per pattern; null when matched literally
  std::unique_ptr<std::atomic<bool>[]> used;
  bool hit(size_t i, std::string_view name) const;
};

PatternList::PatternList() : impl_(std::make_unique<Impl>()) {}
PatternList::~PatternList() = default;
PatternList::PatternList(PatternList&&) noexcept = default;
PatternList& PatternList::operator=(PatternList&&) noexcept = default;

PatternList::PatternList(std::vector<std::string> patterns, PatternSpelling spelling, std::string field)
    : impl_(std::make_unique<Impl>()) {
  impl_->spelling = spelling;
  impl_->field = std::move(field);
  impl_->used = std::make_unique<std::atomic<bool>[]>(patterns.size());
  for (const auto& p : patterns) {
    std::unique_ptr<RE2> re;
    if (spelling == PatternSpelling::RegexPrefix) {
      re = compile(p, impl_->field);
    } else if (spelling == PatternSpelling::ExactOrRegex && p.starts_with(kRegexPrefix)) {
      re = compile(p.substr(kRegexPrefix.size()), impl_->field);
    }
    impl_->regexes.push_back(std::move(re));
  }
  impl_->patterns = std::move(patterns);
}

bool PatternList::empty() const { return impl_->patterns.empty(); }
size_t PatternList::size() const { return impl_->patterns.size(); }
const std::vector<std::string>& PatternList::patterns() const { return impl_->patterns; }

bool PatternList::Impl::hit(size_t i, std::string_view name) const {
  const std::string& p = patterns[i];
  const RE2* re = regexes[i].get();
  const re2::StringPiece text(name.data(), name.size());
  switch (spelling) {
    case PatternSpelling::Substring: return name.find(p) != std::string_view::npos;
    case PatternSpelling::Exact: return name == p;
    case PatternSpelling::ExactOrRegex: return re ? RE2::FullMatch(text, *re) : name == p;
    case PatternSpelling::RegexPrefix: return re->Match(text, 0, text.size(), RE2::ANCHOR_START, nullptr, 0);
    case PatternSpelling::Wildcard: return fnmatch(p.c_str(), std::string(name).c_str(), 0) == 0;
  }
  return false;
}

std::optional<size_t> PatternList::first_match(std::string_view name) const {
  for (size_t i = 0; i < impl_->patterns.size(); ++i)
    if (impl_->hit(i, name)) {
      impl_->used[i].store(true, std::memory_order_relaxed);
      return i;
    }
  return std::nullopt;
}

std::vector<size_t> PatternList::all_matches(std::string_view name) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < impl_->patterns.size(); ++i)
    if (impl_->hit(i, name)) {
      impl_->used[i].store(true, std::memory_order_relaxed);
      out.push_back(i);
    }
  return out;
}

bool PatternList::used(size_t i) const { return impl_->used[i].load(std::memory_order_relaxed); }

std::vector<std::string> PatternList::unmatched() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < impl_->patterns.size(); ++i)
    if (!impl_->used[i].load(std::memory_order_relaxed))
      out.push_back(fmt::format("{}: {}", impl_->field, impl_->patterns[i]));
  return out;
}

void validate_regex(const std::string& pattern, const std::string& field) { compile(pattern, field); }

std::vector<std::string> checkpoint_names(const LayerInfo& layer) {
  if (layer.shard_prefixes.empty()) return {layer.prefix};
  return layer.shard_prefixes;
}

}  // namespace qlm
