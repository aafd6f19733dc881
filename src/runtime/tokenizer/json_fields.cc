#include "runtime/tokenizer/json_fields.h"

#include "core/error.h"
#include "io/json.h"

namespace qlm::runtime::tok {
namespace {

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

}  // namespace

bool Field::has(std::string_view key) const {
  require_object();
  const auto it = node_->find(key);
  return it != node_->end() && !it->is_null();
}

Field Field::at(std::string_view key) const {
  require_object();
  const auto it = node_->find(key);
  if (it == node_->end())
    fail("tokenizer.field", ErrorContext{*file_, "", ""}, "the file may be truncated or from an unsupported version",
         "missing field {}", join_path(path_, key));
  return Field(*it, *file_, join_path(path_, key));
}

Field Field::at(size_t index) const {
  require_array();
  return Field((*node_)[index], *file_, path_ + "[" + std::to_string(index) + "]");
}

size_t Field::size() const {
  require_array();
  return node_->size();
}

void Field::require_object() const {
  if (!node_->is_object()) fail_type("object");
}

void Field::require_array() const {
  if (!node_->is_array()) fail_type("array");
}

std::string Field::as_string() const {
  if (!node_->is_string()) fail_type("string");
  return node_->get<std::string>();
}

int64_t Field::as_int() const {
  if (node_->is_number_unsigned()) {
    const auto value = node_->get<uint64_t>();
    if (value > static_cast<uint64_t>(INT64_MAX)) fail_value("integer out of range");
    return static_cast<int64_t>(value);
  }
  if (!node_->is_number_integer()) fail_type("integer");
  return node_->get<int64_t>();
}

bool Field::as_bool() const {
  if (!node_->is_boolean()) fail_type("boolean");
  return node_->get<bool>();
}

std::optional<std::string> Field::opt_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return at(key).as_string();
}

bool Field::bool_or(std::string_view key, bool fallback) const { return has(key) ? at(key).as_bool() : fallback; }

int64_t Field::int_or(std::string_view key, int64_t fallback) const { return has(key) ? at(key).as_int() : fallback; }

void Field::fail_type(std::string_view expected) const {
  fail("tokenizer.field", ErrorContext{*file_, "", ""}, "", "field {} must be {}, found {}",
       path_.empty() ? "(root)" : path_, expected, io::json_type_name(*node_));
}

void Field::fail_value(std::string_view message) const {
  fail("tokenizer.field", ErrorContext{*file_, "", ""}, "", "field {}: {}", path_.empty() ? "(root)" : path_, message);
}

void Field::fail_unsupported(std::string_view what) const {
  fail("tokenizer.unsupported", ErrorContext{*file_, "", ""},
       "qlm supports byte-level BPE and SentencePiece-style BPE tokenizers; convert the tokenizer or open an issue",
       "{} (field {}) is not supported", what, path_.empty() ? "(root)" : path_);
}

}  // namespace qlm::runtime::tok
