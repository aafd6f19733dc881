// JsonView: typed, non-coercing access to one JSON object of a parsed file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "core/error.h"
#include "io/json.h"

namespace qlm::io {
namespace {

ErrorContext in_file(const std::string& file) {
  ErrorContext context;
  context.file = file;
  return context;
}

using Json = nlohmann::json;

constexpr size_t kMaxShownValueChars = 80;

// A value as it appears in the file, shortened for messages: "4", "\"4\"", "[1, 2, ...".
std::string shown_value(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxShownValueChars) text = text.substr(0, kMaxShownValueChars) + "...";
  return text;
}

const Json& empty_object() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

}  // namespace

JsonView::JsonView(std::shared_ptr<const Json> doc, std::string source, std::string path)
    : doc_(std::move(doc)), node_(doc_.get()), source_(std::move(source)), path_(std::move(path)) {
  if (!doc_) fail("json.type", in_file(source_), "", "{}: no document", path_.empty() ? "(root)" : path_);
  if (!doc_->is_object())
    fail("json.type", in_file(source_), "", "{}: expected object, found {} {}", path_.empty() ? "(root)" : path_,
         json_type_name(*doc_), shown_value(*doc_));
}

JsonView::JsonView(std::shared_ptr<const Json> doc, const Json* node, std::string source, std::string path)
    : doc_(std::move(doc)), node_(node), source_(std::move(source)), path_(std::move(path)) {}

JsonView JsonView::from_file(const std::filesystem::path& path) {
  return JsonView(std::make_shared<const Json>(read_json_file(path)), path.string());
}

bool JsonView::has(std::string_view key) const { return node_ && node_->contains(key); }

bool JsonView::is_null(std::string_view key) const {
  if (!node_) return false;
  auto it = node_->find(key);
  return it != node_->end() && it->is_null();
}

std::vector<std::string> JsonView::keys() const {
  std::vector<std::string> out;
  if (!node_) return out;
  for (const auto& [key, value] : node_->items()) out.push_back(key);
  return out;
}

std::string JsonView::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

const Json& JsonView::at(std::string_view key) const {
  const Json& node = node_ ? *node_ : empty_object();
  auto it = node.find(key);
  if (it == node.end())
    fail("config.missing_key", in_file(source_), "", "{}: required key is missing", key_path(key));
  return *it;
}

namespace {

[[noreturn]] void fail_type(const std::string& source, const std::string& path, std::string_view expected,
                            const Json& found) {
  fail("config.type", in_file(source), "", "{}: expected {}, found {} {}", path, expected, json_type_name(found),
       shown_value(found));
}

int64_t as_int(const Json& value, const std::string& source, const std::string& path) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("config.value", in_file(source), "", "{}: integer {} does not fit in 64 signed bits", path, u);
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  fail_type(source, path, "integer", value);
}

std::string as_string(const Json& value, const std::string& source, const std::string& path) {
  if (!value.is_string()) fail_type(source, path, "string", value);
  return value.get<std::string>();
}

}  // namespace

int64_t JsonView::get_int(std::string_view key) const { return as_int(at(key), source_, key_path(key)); }

double JsonView::get_number(std::string_view key) const {
  const Json& value = at(key);
  if (value.is_number_float()) return value.get<double>();
  if (value.is_number_unsigned()) return static_cast<double>(value.get<uint64_t>());
  if (value.is_number_integer()) return static_cast<double>(value.get<int64_t>());
  fail_type(source_, key_path(key), "number", value);
}

bool JsonView::get_bool(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail_type(source_, key_path(key), "boolean", value);
  return value.get<bool>();
}

std::string JsonView::get_string(std::string_view key) const {
  return as_string(at(key), source_, key_path(key));
}

std::vector<std::string> JsonView::get_string_list(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail_type(source_, key_path(key), "list of strings", value);
  std::vector<std::string> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(as_string(value[i], source_, fmt::format("{}[{}]", key_path(key), i)));
  return out;
}

std::vector<int64_t> JsonView::get_int_list(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_array()) fail_type(source_, key_path(key), "list of integers", value);
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(as_int(value[i], source_, fmt::format("{}[{}]", key_path(key), i)));
  return out;
}

JsonView JsonView::get_object(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_object()) fail_type(source_, key_path(key), "object", value);
  return JsonView(doc_, &value, source_, key_path(key));
}

namespace {

// True when `key` should be read: present and not null.
bool present(const JsonView& view, std::string_view key) { return view.has(key) && !view.is_null(key); }

}  // namespace

std::optional<int64_t> JsonView::opt_int(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_int(key);
}
std::optional<double> JsonView::opt_number(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_number(key);
}
std::optional<bool> JsonView::opt_bool(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_bool(key);
}
std::optional<std::string> JsonView::opt_string(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_string(key);
}
std::optional<std::vector<std::string>> JsonView::opt_string_list(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_string_list(key);
}
std::optional<std::vector<int64_t>> JsonView::opt_int_list(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_int_list(key);
}
std::optional<JsonView> JsonView::opt_object(std::string_view key) const {
  if (!present(*this, key)) return std::nullopt;
  return get_object(key);
}

void JsonView::fail_value(std::string_view key, std::string_view expected, std::string_view remedy) const {
  const std::string found = has(key) ? shown_value(at(key)) : std::string("(absent)");
  fail("config.value", in_file(source_), std::string(remedy), "{}: unsupported value {}; expected {}", key_path(key),
       found, expected);
}

void JsonView::reject_unknown_keys(const std::vector<std::string_view>& allowed) const {
  for (const std::string& key : keys()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known)
      fail("config.unknown_key", in_file(source_), "remove the key or check its spelling",
           "{}: unknown key; allowed keys here: {}", key_path(key), fmt::join(allowed, ", "));
  }
}

}  // namespace qlm::io
