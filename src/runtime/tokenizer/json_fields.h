// Typed access to tokenizer.json fields. Errors are "tokenizer.field" and name the file and the
// field path ("pre_tokenizer.pretokenizers[1].pattern"), with the type expected and found.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qlm::runtime::tok {

using Json = nlohmann::json;

// A JSON node together with where it is, for error messages.
class Field {
 public:
  Field(const Json& node, const std::string& file, std::string path) : node_(&node), file_(&file), path_(std::move(path)) {}

  const Json& json() const { return *node_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return node_->is_null(); }

  bool has(std::string_view key) const;  // present and not null
  Field at(std::string_view key) const;  // required member of an object
  Field at(size_t index) const;          // element of an array
  size_t size() const;                   // array length (requires an array)

  std::string as_string() const;
  int64_t as_int() const;
  bool as_bool() const;
  void require_object() const;
  void require_array() const;

  std::string string_at(std::string_view key) const { return at(key).as_string(); }
  std::optional<std::string> opt_string(std::string_view key) const;
  bool bool_or(std::string_view key, bool fallback) const;
  int64_t int_or(std::string_view key, int64_t fallback) const;

  // The "type" member of a component ("BPE", "ByteLevel", ...).
  std::string type_name() const { return string_at("type"); }
  [[noreturn]] void fail_value(std::string_view message) const;       // "tokenizer.field"
  [[noreturn]] void fail_unsupported(std::string_view what) const;     // "tokenizer.unsupported"

 private:
  [[noreturn]] void fail_type(std::string_view expected) const;
  const Json* node_;
  const std::string* file_;
  std::string path_;
};

}  // namespace qlm::runtime::tok
