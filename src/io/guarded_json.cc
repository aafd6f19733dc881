#include "io/guarded_json.h"

#include <unordered_set>
#include <vector>

namespace qlm::io {
namespace {

// Thrown from the parser callback to stop parsing at the first guard violation.
struct GuardViolation {
  JsonFailure failure;
};

// One open object or array. `last_key` is the key whose value is being parsed (objects only).
struct Frame {
  bool is_object = false;
  std::unordered_set<std::string> keys;
  std::string last_key;
};

std::string key_path_of(const std::vector<Frame>& frames) {
  std::string path;
  // The innermost frame is the object holding the duplicate; its own key is in its parent.
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    if (!frames[i].is_object) {
      path += "[]";
      continue;
    }
    if (!path.empty()) path += '.';
    path += frames[i].last_key;
  }
  return path;
}

}  // namespace

std::variant<nlohmann::json, JsonFailure> parse_guarded_json(std::string_view text, int max_depth) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<Frame> frames;
  auto guard = [&](int /*depth*/, Event event, nlohmann::json& parsed) -> bool {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (static_cast<int>(frames.size()) >= max_depth)
          throw GuardViolation{{JsonFailure::Kind::too_deep,
                                "JSON nesting deeper than " + std::to_string(max_depth) + " levels", "", 0}};
        frames.push_back(Frame{event == Event::object_start, {}, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case Event::key: {
        Frame& top = frames.back();
        std::string key = parsed.get<std::string>();
        if (!top.keys.insert(key).second)
          throw GuardViolation{{JsonFailure::Kind::duplicate_key, key, key_path_of(frames), 0}};
        top.last_key = std::move(key);
        break;
      }
      case Event::value:
        break;
    }
    return true;
  };
  // nlohmann's lexer takes a NUL byte for the end of input and would accept "{}\0garbage".
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return JsonFailure{JsonFailure::Kind::syntax, "NUL byte at offset " + std::to_string(nul), "", nul + 1};
  try {
    return nlohmann::json::parse(text.begin(), text.end(), guard, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const GuardViolation& violation) {
    return violation.failure;
  } catch (const nlohmann::json::parse_error& e) {
    return JsonFailure{JsonFailure::Kind::syntax, e.what(), "", e.byte};
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number too large for a double (1e400).
    return JsonFailure{JsonFailure::Kind::syntax, e.what(), "", 0};
  }
}

std::string json_kind(const nlohmann::json& value) {
  using T = nlohmann::json::value_t;
  switch (value.type()) {
    case T::null: return "null";
    case T::object: return "object";
    case T::array: return "array";
    case T::string: return "string";
    case T::boolean: return "boolean";
    case T::number_integer: return "negative integer";
    case T::number_unsigned: return "unsigned integer";
    case T::number_float: return "float";
    case T::binary: return "binary";
    case T::discarded: return "discarded";
  }
  return "unknown";
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace qlm::io
