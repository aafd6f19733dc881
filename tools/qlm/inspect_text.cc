// Text rendering of the `qlm inspect` report. Values from config files are printed as JSON
// (strings quoted), so their types stay visible.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "tools/qlm/inspect_report.h"

namespace qlm::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr size_t kMaxValueChars = 100;

std::string value_text(const OrderedJson& v) {
  if (v.is_null()) return "-";
  std::string text = v.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  return text.size() > kMaxValueChars ? text.substr(0, kMaxValueChars) + "..." : text;
}

// A plain (unquoted) string for names, a JSON rendering for anything else.
std::string name_text(const OrderedJson& v) { return v.is_string() ? v.get<std::string>() : value_text(v); }

std::string human_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

const OrderedJson& field(const OrderedJson& object, const char* key) {
  static const OrderedJson kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

void render_config(const OrderedJson& c, std::string& out) {
  if (!c.is_object()) {
    out += "config: unavailable\n";
    return;
  }
  std::string arch = "-";
  if (const OrderedJson& a = field(c, "architectures"); a.is_array() && !a.empty()) {
    std::vector<std::string> names;
    for (const auto& n : a) names.push_back(name_text(n));
    arch = fmt::format("{}", fmt::join(names, ", "));
  } else if (!a.is_null()) {
    arch = value_text(a);
  }
  out += fmt::format("architecture: {}\n", arch);
  out += fmt::format("model_type:   {}\n", name_text(field(c, "model_type")));
  const OrderedJson& dtype = c.contains("dtype") ? field(c, "dtype") : field(c, "torch_dtype");
  out += fmt::format("dtype:        {}\n", name_text(dtype));
  out += fmt::format("layers {}, hidden {}, intermediate {}, heads {}, kv heads {}, head_dim {}, vocab {}\n",
                     value_text(field(c, "num_hidden_layers")), value_text(field(c, "hidden_size")),
                     value_text(field(c, "intermediate_size")), value_text(field(c, "num_attention_heads")),
                     value_text(field(c, "num_key_value_heads")), value_text(field(c, "head_dim")),
                     value_text(field(c, "vocab_size")));
}

void render_quantization(const OrderedJson& q, std::string& out) {
  if (q.is_null()) {
    out += "quantization: none\n";
    return;
  }
  std::vector<std::string> origins;
  for (const auto& o : q["origins"]) origins.push_back(name_text(o));
  out += fmt::format("quantization: {} (from {})\n", name_text(q["quant_method"]), fmt::join(origins, "; "));
  for (const auto& [key, value] : q["fields"].items()) {
    if (key == "quant_method") continue;
    out += fmt::format("  {}: {}\n", key, value_text(value));
  }
  if (const OrderedJson& groups = field(q, "config_groups"); groups.is_object()) {
    out += "  config_groups:\n";
    for (const auto& [name, g] : groups.items()) {
      if (!g.is_object()) {
        out += fmt::format("    {}: {}\n", name, value_text(g));
        continue;
      }
      out += fmt::format("    {}: targets {}\n", name, value_text(field(g, "targets")));
      for (const auto& [role, line] : g.items()) {
        if (role != "targets") out += fmt::format("      {}: {}\n", role, name_text(line));
      }
    }
  }
  if (!q["other_keys"].empty()) {
    std::vector<std::string> keys;
    for (const auto& k : q["other_keys"]) keys.push_back(name_text(k));
    out += fmt::format("  other keys: {}\n", fmt::join(keys, ", "));
  }
}

void render_tensors(const OrderedJson& t, std::string& out) {
  if (t.is_null()) {
    out += "tensors: unavailable\n";
    return;
  }
  const uint64_t files = t["files"].get<uint64_t>();
  out += fmt::format("tensors: {} in {} file{}, {} bytes ({})\n", t["count"].get<uint64_t>(), files,
                     files == 1 ? "" : "s", t["bytes"].get<uint64_t>(), human_bytes(t["bytes"].get<uint64_t>()));
  out += "  by dtype:\n";
  for (const auto& [dtype, tally] : t["by_dtype"].items())
    out += fmt::format("    {:<28} {:>6} tensors {:>14} bytes\n", dtype, tally["count"].get<uint64_t>(),
                       tally["bytes"].get<uint64_t>());
  out += "  by format:\n";
  for (const auto& [key, tally] : t["by_format"].items())
    out += fmt::format("    {:<28} {:>6} tensors {:>14} bytes\n", tally["label"].get<std::string>(),
                       tally["count"].get<uint64_t>(), tally["bytes"].get<uint64_t>());
}

void render_verify(const OrderedJson& v, std::string& out) {
  out += fmt::format("verify-data: read {} bytes ({}) in {:.3f} s, {:.2f} GB/s\n", v["bytes"].get<uint64_t>(),
                     human_bytes(v["bytes"].get<uint64_t>()), v["seconds"].get<double>(),
                     v["gigabytes_per_second"].get<double>());
  for (const auto& f : v["files"])
    out += fmt::format("  {}: {} bytes, checksum {}\n", name_text(f["file"]), f["bytes"].get<uint64_t>(),
                       name_text(f["checksum"]));
}

void render_list(const char* title, const OrderedJson& items, std::string& out) {
  if (items.empty()) {
    out += fmt::format("{}: none\n", title);
    return;
  }
  out += fmt::format("{}:\n", title);
  for (const auto& item : items) out += fmt::format("  - {}\n", name_text(item));
}

}  // namespace

std::string render_inspect_text(const OrderedJson& report) {
  std::string out = fmt::format("model: {}\n", name_text(report["model_dir"]));
  render_config(report["config"], out);
  render_quantization(report["quantization"], out);
  render_tensors(report["tensors"], out);
  if (report.contains("verify")) render_verify(report["verify"], out);
  render_list("warnings", report["warnings"], out);
  if (!report["errors"].empty()) render_list("errors", report["errors"], out);
  return out;
}

}  // namespace qlm::cli
