#include "runtime/tokenizer/normalizer.h"

#include <vector>

#include "runtime/tokenizer/pattern.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = unicode_normalize(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = unicode_lowercase(text); }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(const Field& pattern, std::string content) : pattern_(pattern), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Strips Unicode whitespace from either end.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!is_whitespace(next_codepoint(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t next = start;
        if (!is_whitespace(next_codepoint(text, next))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Field& field) {
  if (field.is_null()) return nullptr;
  const std::string type = field.type_name();
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(field.string_at("prepend"));
  if (type == "Replace") return std::make_unique<Replace>(field.at("pattern"), field.string_at("content"));
  if (type == "Strip") return std::make_unique<Strip>(field.bool_or("strip_left", false), field.bool_or("strip_right", false));
  if (type == "Sequence") {
    const Field list = field.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i)
      if (auto step = make_normalizer(list.at(i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  field.fail_unsupported("normalizer type \"" + type + "\"");
}

}  // namespace qlm::runtime::tok
