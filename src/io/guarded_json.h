// JSON parsing for untrusted file headers: detects duplicate keys (which nlohmann would silently
// overwrite) and bounds nesting depth, and reports failures as data so that each caller can raise
// them under its own error codes ("safetensors.*", "checkpoint.*").
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace qlm::io {

inline constexpr int kMaxHeaderJsonDepth = 64;

struct JsonFailure {
  enum class Kind { syntax, duplicate_key, too_deep };
  Kind kind = Kind::syntax;
  std::string detail;     // parser message, or the duplicated key
  std::string key_path;   // for duplicate_key: the enclosing object's key path ("" = top level)
  size_t byte_position = 0;
};

// Parses `text` strictly: one JSON value, nothing but JSON whitespace around it.
std::variant<nlohmann::json, JsonFailure> parse_guarded_json(std::string_view text,
                                                             int max_depth = kMaxHeaderJsonDepth);

// The JSON type of a value as a word for messages ("unsigned integer", "float", "string", ...).
std::string json_kind(const nlohmann::json& value);
// A short excerpt of a value for messages (long dumps are cut).
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace qlm::io
