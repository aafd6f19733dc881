#include "tools/qlm/inspect_quant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace qlm::cli {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

enum class Expect : uint8_t { Integer, Boolean, String, StringList, IntegerList, Object, Any };

struct KnownField {
  std::string_view key;
  Expect expect;
};

// Display order: what the format is, its numerics, then what it leaves unquantized.
constexpr KnownField kKnownFields[] = {
    {"quant_method", Expect::String},
    {"quant_algo", Expect::String},
    {"bits", Expect::Integer},
    {"w_bit", Expect::Integer},
    {"group_size", Expect::Integer},
    {"q_group_size", Expect::Integer},
    {"sym", Expect::Boolean},
    {"zero_point", Expect::Boolean},
    {"desc_act", Expect::Boolean},
    {"checkpoint_format", Expect::String},
    {"format", Expect::String},
    {"version", Expect::String},
    {"lm_head", Expect::Boolean},
    {"activation_scheme", Expect::String},
    {"weight_block_size", Expect::IntegerList},
    {"kv_cache_quant_algo", Expect::String},
    {"kv_cache_scheme", Expect::Object},
    {"load_in_4bit", Expect::Boolean},
    {"load_in_8bit", Expect::Boolean},
    {"bnb_4bit_quant_type", Expect::String},
    {"bnb_4bit_use_double_quant", Expect::Boolean},
    {"bnb_4bit_compute_dtype", Expect::String},
    {"bnb_4bit_quant_storage", Expect::String},
    {"modules_to_not_convert", Expect::StringList},
    {"ignore", Expect::StringList},
    {"ignored_layers", Expect::StringList},
    {"exclude_modules", Expect::StringList},
    {"llm_int8_skip_modules", Expect::StringList},
    {"modules_in_block_to_quantize", Expect::Any},
    {"dynamic", Expect::Object},
    {"sparsity_config", Expect::Any},
    {"transform_config", Expect::Any},
};

std::string_view expect_name(Expect e) {
  switch (e) {
    case Expect::Integer: return "integer";
    case Expect::Boolean: return "boolean";
    case Expect::String: return "string";
    case Expect::StringList: return "list of strings";
    case Expect::IntegerList: return "list of integers";
    case Expect::Object: return "object";
    case Expect::Any: return "any";
  }
  return "any";
}

bool all_of_type(const Json& list, bool (Json::*is)() const noexcept) {
  return std::all_of(list.begin(), list.end(), [is](const Json& v) { return (v.*is)(); });
}

bool matches(const Json& value, Expect e) {
  if (value.is_null()) return true;  // null reads as absent
  switch (e) {
    case Expect::Integer: return value.is_number_integer();
    case Expect::Boolean: return value.is_boolean();
    case Expect::String: return value.is_string();
    case Expect::StringList: return value.is_array() && all_of_type(value, &Json::is_string);
    case Expect::IntegerList: return value.is_array() && all_of_type(value, &Json::is_number_integer);
    case Expect::Object: return value.is_object();
    case Expect::Any: return true;
  }
  return true;
}

std::string shown(const Json& value) {
  constexpr size_t kMaxChars = 60;
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  return text.size() > kMaxChars ? text.substr(0, kMaxChars) + "..." : text;
}

// One compressed-tensors QuantizationArgs object on one line, read leniently.
std::string args_line(const Json& args) {
  if (args.is_null()) return "none";
  if (!args.is_object()) return shown(args);
  std::vector<std::string> parts;
  auto str = [&](const char* key) -> std::string {
    auto it = args.find(key);
    if (it == args.end() || it->is_null()) return "";
    return it->is_string() ? it->get<std::string>() : shown(*it);
  };
  const std::string type = str("type");
  const std::string bits = str("num_bits");
  if (!type.empty() || !bits.empty()) parts.push_back((type.empty() ? "?" : type) + (bits.empty() ? "?" : bits));
  if (auto it = args.find("symmetric"); it != args.end() && it->is_boolean())
    parts.push_back(it->get<bool>() ? "sym" : "asym");
  for (const char* key : {"strategy", "group_size", "block_structure", "dynamic", "actorder", "observer"}) {
    const std::string value = str(key);
    if (!value.empty()) parts.push_back(fmt::format("{}={}", key, value));
  }
  return parts.empty() ? "{}" : fmt::format("{}", fmt::join(parts, " "));
}

void summarize_groups(const Json& groups, QuantSummary& out, const std::string& where) {
  if (!groups.is_object()) {
    out.warnings.push_back(fmt::format("{} is {}; expected an object of groups", where, io::json_type_name(groups)));
    out.fields["config_groups"] = groups;
    return;
  }
  for (const auto& [name, group] : groups.items()) {
    OrderedJson g = OrderedJson::object();
    if (!group.is_object()) {
      out.groups[name] = shown(group);
      continue;
    }
    g["targets"] = group.value("targets", Json());
    for (const char* role : {"weights", "input_activations", "output_activations"}) {
      if (group.contains(role)) g[role] = args_line(group[role]);
    }
    if (group.contains("format")) g["format"] = group["format"];
    out.groups[name] = std::move(g);
  }
}

void summarize_object(const io::JsonView& view, const std::string& prefix, QuantSummary& out) {
  std::vector<std::string> seen;
  for (const KnownField& f : kKnownFields) {
    if (!view.has(f.key)) continue;
    const Json& value = view.at(f.key);
    // A compressed-tensors kv_cache_scheme is QuantizationArgs: one line like the config groups.
    const bool args_object = f.key == "kv_cache_scheme" && value.is_object();
    out.fields[prefix + std::string(f.key)] = args_object ? OrderedJson(args_line(value)) : OrderedJson(value);
    seen.emplace_back(f.key);
    if (!matches(value, f.expect))
      out.warnings.push_back(fmt::format("{}: expected {}, found {} {} (loading will reject it)",
                                         view.key_path(f.key), expect_name(f.expect), io::json_type_name(value),
                                         shown(value)));
  }
  if (view.has("config_groups")) {
    summarize_groups(view.at("config_groups"), out, view.key_path("config_groups"));
    seen.emplace_back("config_groups");
  }
  // ModelOpt's hf_quant_config.json nests the fields under "quantization".
  if (view.has("quantization") && view.at("quantization").is_object()) {
    summarize_object(view.get_object("quantization"), prefix + "quantization.", out);
    seen.emplace_back("quantization");
  }
  for (const std::string& key : view.keys()) {
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) out.other_keys.push_back(prefix + key);
  }
}

}  // namespace

QuantSummary summarize_quant_config(const io::JsonView& config) {
  QuantSummary out;
  summarize_object(config, "", out);
  return out;
}

}  // namespace qlm::cli
