// Strict parsing: nlohmann's parser is iterative (no recursion), so depth is limited here, in the
// parser callback, before any deep value is built.
#include "io/json.h"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace qlm::io {
namespace {

ErrorContext in_file(const std::string& file) {
  ErrorContext context;
  context.file = file;
  return context;
}

using Json = nlohmann::json;

// One open container while parsing: its keys so far (objects) or its element count (arrays).
struct OpenContainer {
  bool is_array = false;
  size_t index = 0;           // arrays: position of the element being parsed
  std::string current_key;    // objects: key of the member being parsed
  std::set<std::string> keys; // objects: every key seen
};

// Tracks nesting during a parse to reject duplicate keys, depth bombs and out-of-range numbers.
class StrictParseState {
 public:
  explicit StrictParseState(const std::string& source) : source_(source) {}

  bool on_event(Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        open(event == Json::parse_event_t::array_start);
        break;
      case Json::parse_event_t::key: {
        OpenContainer& top = stack_.back();
        std::string key = parsed.get<std::string>();
        if (!top.keys.insert(key).second)
          fail("json.duplicate_key", in_file(source_), "remove or rename one of the two entries",
               "duplicate key \"{}\" in object {}", key, object_path(stack_.size()));
        top.current_key = std::move(key);
        break;
      }
      case Json::parse_event_t::value:
        element_done();
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        stack_.pop_back();
        element_done();
        break;
    }
    return true;
  }

 private:
  void open(bool is_array) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth)
      fail("json.too_deep", in_file(source_), "", "nesting deeper than {} levels at {}", kMaxJsonDepth,
           value_path());
    stack_.emplace_back().is_array = is_array;
  }

  // An element of the enclosing array (if any) is complete.
  void element_done() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
  }

  // Path of the container at nesting level `levels` (1 = the root container).
  std::string object_path(size_t levels) const {
    std::string path;
    for (size_t i = 0; i + 1 < levels; ++i) {
      const OpenContainer& c = stack_[i];
      if (c.is_array)
        path += fmt::format("[{}]", c.index);
      else
        path += (path.empty() ? "" : ".") + c.current_key;
    }
    return path.empty() ? "(root)" : path;
  }

  // Path of the value being parsed now.
  std::string value_path() const { return object_path(stack_.size() + 1); }

  const std::string& source_;
  std::vector<OpenContainer> stack_;
};

// nlohmann messages start with "[json.exception.parse_error.101] "; our code replaces that tag.
std::string strip_exception_prefix(const std::string& what) {
  const size_t start = what.find("] ");
  return start == std::string::npos ? what : what.substr(start + 2);
}

}  // namespace

Json parse_json_strict(std::string_view text, const std::string& source) {
  StrictParseState state(source);
  Json::parser_callback_t callback = [&state](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    return state.on_event(event, parsed);
  };
  // nlohmann stops at a NUL byte as if the input ended there, so "{}\0garbage" would parse.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail("json.parse", in_file(source), "", "invalid JSON at byte {}: NUL byte", nul + 1);
  try {
    return Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    fail("json.parse", in_file(source), "", "invalid JSON at byte {}: {}", e.byte,
         strip_exception_prefix(e.what()));
  } catch (const Json::out_of_range& e) {
    // 406: a float literal beyond double range (nlohmann refuses to turn it into infinity).
    if (e.id == 406) fail("json.number_range", in_file(source), "", "{}", strip_exception_prefix(e.what()));
    fail("json.parse", in_file(source), "", "invalid JSON: {}", strip_exception_prefix(e.what()));
  } catch (const Json::exception& e) {
    fail("json.parse", in_file(source), "", "invalid JSON: {}", strip_exception_prefix(e.what()));
  }
}

Json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail("json.read", in_file(path.string()), "", "cannot read: {}", ec.message());
  if (size > kMaxJsonFileBytes)
    fail("json.read", in_file(path.string()), "", "file is {} bytes; JSON files over {} bytes are refused", size,
         kMaxJsonFileBytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("json.read", in_file(path.string()), "", "cannot open for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail("json.read", in_file(path.string()), "", "read error");
  return parse_json_strict(buffer.str(), path.string());
}

std::string json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::null:
      return "null";
    case Json::value_t::binary:
      return "binary";
    case Json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

}  // namespace qlm::io
