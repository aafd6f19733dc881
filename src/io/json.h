// Strict JSON: parsing that rejects duplicate keys and depth bombs, and typed access that never
// coerces (a "4" is not 4, 4.0 is not 4, true is not 1). Errors name the source file and the key
// path, and say what type was expected and what was found.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qlm::io {

inline constexpr int kMaxJsonDepth = 64;  // nested objects/arrays; the root container is level 1
inline constexpr uint64_t kMaxJsonFileBytes = 256ull << 20;

// Parses `text`; throws qlm::Error "json.parse" (with the byte position), "json.duplicate_key"
// (naming the key and its object path), "json.too_deep", or "json.number_range" (a number that
// does not fit a double, such as 1e400). `source` names the file in errors. Never recurses, so
// no input can exhaust the stack.
nlohmann::json parse_json_strict(std::string_view text, const std::string& source);
// Reads and parses a file; "json.read" if it cannot be read or exceeds kMaxJsonFileBytes.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Typed, non-coercing view of a JSON object. Keeps the document alive.
class JsonView {
 public:
  JsonView() = default;
  // `doc` must be an object ("json.type" otherwise). `path` is the key path of `doc` inside the
  // source ("quantization_config"), used in messages.
  JsonView(std::shared_ptr<const nlohmann::json> doc, std::string source, std::string path = "");
  static JsonView from_file(const std::filesystem::path& path);

  bool has(std::string_view key) const;
  bool is_null(std::string_view key) const;  // present with value null
  // Sorted by key: nlohmann::json keeps object members in a std::map, so document order is lost.
  std::vector<std::string> keys() const;
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;  // "quantization_config.bits"
  const nlohmann::json& json() const { return *node_; }
  const nlohmann::json& at(std::string_view key) const;  // "config.missing_key" if absent

  // Required fields: "config.missing_key" when absent, "config.type" when of another type (null
  // included). get_int accepts only JSON integers ("config.value" if beyond int64); get_number
  // accepts integers and floats. List accessors name the offending element ("key[2]").
  int64_t get_int(std::string_view key) const;
  double get_number(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<std::string> get_string_list(std::string_view key) const;
  std::vector<int64_t> get_int_list(std::string_view key) const;
  JsonView get_object(std::string_view key) const;

  // Optional fields: nullopt when absent or null; a present value of another type is an error.
  std::optional<int64_t> opt_int(std::string_view key) const;
  std::optional<double> opt_number(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
  std::optional<std::vector<std::string>> opt_string_list(std::string_view key) const;
  std::optional<std::vector<int64_t>> opt_int_list(std::string_view key) const;
  std::optional<JsonView> opt_object(std::string_view key) const;

  // Throws "config.value" naming this field, the value found, and `expected` (e.g. "one of 2, 3, 4, 8").
  [[noreturn]] void fail_value(std::string_view key, std::string_view expected,
                               std::string_view remedy = "") const;
  // Throws "config.unknown_key" for the first key not in `allowed` (for schemas with
  // extra="forbid", such as compressed-tensors QuantizationArgs).
  void reject_unknown_keys(const std::vector<std::string_view>& allowed) const;

 private:
  JsonView(std::shared_ptr<const nlohmann::json> doc, const nlohmann::json* node, std::string source,
           std::string path);
  std::shared_ptr<const nlohmann::json> doc_;
  const nlohmann::json* node_ = nullptr;
  std::string source_;
  std::string path_;
};

// JSON type name for messages: "integer", "float", "string", "boolean", "array", "object", "null".
std::string json_type_name(const nlohmann::json& value);

}  // namespace qlm::io
