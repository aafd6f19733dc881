#include "runtime/tokenizer/pattern.h"

namespace qlm::runtime::tok {

Pattern::Pattern(const Field& field) {
  if (field.has("Regex")) {
    regex_ = std::make_unique<Regex>(field.string_at("Regex"), field.file(), field.path() + ".Regex");
  } else if (field.has("String")) {
    literal_ = field.string_at("String");
  } else {
    field.fail_value("expected {\"String\": ...} or {\"Regex\": ...}");
  }
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> matches;
  if (literal_.empty()) return matches;
  for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
    matches.emplace_back(at, at + literal_.size());
  return matches;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  size_t previous = 0;
  for (const auto& [begin, end] : find_all(text)) {
    out.append(text.substr(previous, begin - previous));
    out.append(content);
    previous = end;
  }
  out.append(text.substr(previous));
  return out;
}

}  // namespace qlm::runtime::tok
