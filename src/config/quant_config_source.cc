#include "config/quant_config_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

#include "config/hf_config.h"
#include "core/error.h"

namespace qlm::config {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kHfQuantConfig = "hf_quant_config.json";
constexpr std::array<std::string_view, 2> kLegacyFiles = {"quantize_config.json", "quant_config.json"};

// Fields that change numerics (RELIABILITY.md C9), compared across sources when both have them.
constexpr std::array<std::string_view, 12> kComparedKeys = {
    "quant_method", "bits",    "group_size", "sym",        "zero_point",          "desc_act",
    "lm_head",      "dynamic", "version",    "quant_algo", "kv_cache_quant_algo", "checkpoint_format"};

// AutoAWQ's spellings in quant_config.json / quantize_config.json.
const std::map<std::string, std::string, std::less<>> kLegacyAliases = {{"w_bit", "bits"},
                                                                        {"q_group_size", "group_size"}};

constexpr size_t kShownTensorNames = 3;

ErrorContext in_file(const std::string& file) {
  ErrorContext context;
  context.file = file;
  return context;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

bool is_compared(std::string_view key) {
  return std::find(kComparedKeys.begin(), kComparedKeys.end(), key) != kComparedKeys.end();
}

// The value one source gives for a compared field, and how to name it in a message.
struct Fact {
  Json value;
  std::string where;  // "quantize_config.json: bits"
};

// One place a quantization config was found.
struct Candidate {
  std::string origin;  // "config.json: quantization_config", "quantize_config.json"
  std::string file;    // full path, for ErrorContext
  io::JsonView view;
  std::map<std::string, Fact, std::less<>> facts;  // canonical key -> value
};

void add_facts(Candidate& c, const io::JsonView& view, bool legacy_aliases) {
  for (const std::string& key : view.keys()) {
    std::string canonical = key;
    if (auto alias = kLegacyAliases.find(key); legacy_aliases && alias != kLegacyAliases.end())
      canonical = alias->second;
    if (!is_compared(canonical)) continue;
    const std::string file = std::filesystem::path(view.source()).filename().string();
    c.facts[canonical] = Fact{view.at(key), fmt::format("{}: {}", file, view.key_path(key))};
  }
}

Candidate from_config_json(const io::JsonView& view, std::string origin) {
  Candidate c{std::move(origin), view.source(), view, {}};
  add_facts(c, view, /*legacy_aliases=*/false);
  return c;
}

Candidate from_legacy_file(const std::filesystem::path& path) {
  io::JsonView view = io::JsonView::from_file(path);
  Candidate c{path.filename().string(), path.string(), view, {}};
  add_facts(c, view, /*legacy_aliases=*/true);
  return c;
}

// ModelOpt's hf_quant_config.json: {"producer": {"name": "modelopt", ...}, "quantization": {...}}.
Candidate from_hf_quant_config(const std::filesystem::path& path) {
  io::JsonView file_view = io::JsonView::from_file(path);
  if (std::optional<io::JsonView> producer = file_view.opt_object("producer")) {
    if (std::optional<std::string> name = producer->opt_string("name"); name && lower(*name) != "modelopt")
      producer->fail_value("name", "\"modelopt\" (hf_quant_config.json is ModelOpt's file)");
  }
  io::JsonView quantization = file_view.get_object("quantization");
  auto doc = std::make_shared<Json>(file_view.json());
  if (!doc->contains("quant_method")) (*doc)["quant_method"] = "modelopt";
  Candidate c{std::string(kHfQuantConfig), path.string(), io::JsonView(doc, path.string()), {}};
  add_facts(c, quantization, /*legacy_aliases=*/false);
  c.facts["quant_method"] = Fact{(*doc)["quant_method"], fmt::format("{} (ModelOpt file)", kHfQuantConfig)};
  return c;
}

// Candidates from config.json, authoritative one first.
std::vector<Candidate> config_json_candidates(const std::filesystem::path& config_path) {
  std::vector<Candidate> out;
  if (!std::filesystem::exists(config_path)) return out;
  io::JsonView config = io::JsonView::from_file(config_path);
  for (const char* key : {"quantization_config", "compression_config"}) {
    if (std::optional<io::JsonView> q = config.opt_object(key))
      out.push_back(from_config_json(*q, fmt::format("{}: {}", kConfigFileName, key)));
  }
  if (out.empty()) {
    if (std::optional<io::JsonView> text = config.opt_object("text_config")) {
      if (std::optional<io::JsonView> q = text->opt_object("quantization_config"))
        out.push_back(from_config_json(*q, fmt::format("{}: text_config.quantization_config", kConfigFileName)));
    }
  }
  return out;
}

bool same_value(std::string_view key, const Json& a, const Json& b) {
  if (a.is_string() && b.is_string()) {
    const std::string x = lower(a.get<std::string>());
    const std::string y = lower(b.get<std::string>());
    // ModelOpt's family: config.json may say "modelopt_fp4" / "modelopt_mixed" where the legacy file
    // only says "modelopt".
    if (key == "quant_method" && x.starts_with("modelopt") && y.starts_with("modelopt")) return true;
    return x == y;
  }
  return a == b;
}

void check_agreement(const Candidate& primary, const Candidate& other) {
  for (const auto& [key, fact] : other.facts) {
    auto it = primary.facts.find(key);
    if (it == primary.facts.end() || same_value(key, it->second.value, fact.value)) continue;
    fail("config.conflict", in_file(primary.file),
         fmt::format("make the files agree or delete the stale one; {} is authoritative", primary.origin),
         "{} = {} but {} = {}", it->second.where, it->second.value.dump(), fact.where, fact.value.dump());
  }
}

// What quant_method a legacy file without one probably meant, for the remedy.
std::string guess_method(const io::JsonView& view) {
  if (view.has("w_bit") || view.has("q_group_size") || view.has("zero_point") || view.has("version"))
    return "awq";
  if (view.has("bits") || view.has("desc_act")) return "gptq";
  return "";
}

std::string read_quant_method(const Candidate& c) {
  if (!c.view.has("quant_method")) {
    const std::string guess = guess_method(c.view);
    fail("config.missing_key", in_file(c.file),
         guess.empty() ? std::string("add \"quant_method\" naming the format")
                       : fmt::format("add \"quant_method\": \"{}\" if this is a {} checkpoint", guess, guess),
         "{}: the quantization config has no quant_method", c.origin);
  }
  std::string method = c.view.get_string("quant_method");
  if (method.empty()) c.view.fail_value("quant_method", "a format name such as \"gptq\"");
  return method;
}

bool has_suffix(std::string_view name, std::string_view suffix) { return name.ends_with(suffix); }

}  // namespace

std::optional<QuantConfigSource> find_quant_config(const std::filesystem::path& model_dir) {
  std::vector<Candidate> candidates = config_json_candidates(model_dir / kConfigFileName);
  if (std::filesystem::exists(model_dir / kHfQuantConfig))
    candidates.push_back(from_hf_quant_config(model_dir / kHfQuantConfig));
  for (std::string_view name : kLegacyFiles) {
    if (std::filesystem::exists(model_dir / name)) candidates.push_back(from_legacy_file(model_dir / name));
  }
  if (candidates.empty()) return std::nullopt;

  const Candidate& primary = candidates.front();
  QuantConfigSource source;
  source.config = primary.view;
  source.quant_method = read_quant_method(primary);
  source.origins.push_back(primary.origin);
  for (size_t i = 1; i < candidates.size(); ++i) {
    check_agreement(primary, candidates[i]);
    source.origins.push_back(candidates[i].origin);
    bool shares_a_field = false;
    for (const auto& [key, fact] : candidates[i].facts) shares_a_field = shares_a_field || primary.facts.contains(key);
    if (!shares_a_field)
      source.warnings.push_back(fmt::format("{} is present but shares no numerics field with {}; it is ignored",
                                            candidates[i].origin, primary.origin));
  }
  return source;
}

std::vector<std::string> quantized_tensor_names(const std::vector<std::string>& tensor_names) {
  static constexpr std::array<std::string_view, 9> kSuffixes = {
      ".qweight", ".qzeros", ".weight_packed", ".weight_scale", ".weight_scale_inv", ".weight_zero_point",
      ".absmax",  ".SCB",    ".quant_map"};
  std::vector<std::string> out;
  for (const std::string& name : tensor_names) {
    for (std::string_view suffix : kSuffixes) {
      if (has_suffix(name, suffix)) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

void check_quantized_tensors_have_config(const std::optional<QuantConfigSource>& source,
                                         const std::vector<std::string>& tensor_names,
                                         const std::filesystem::path& model_dir) {
  if (source) return;
  const std::vector<std::string> quantized = quantized_tensor_names(tensor_names);
  if (quantized.empty()) return;
  const std::vector<std::string> shown(quantized.begin(),
                                       quantized.begin() + std::min(quantized.size(), kShownTensorNames));
  fail("config.missing_quantization", in_file((model_dir / kConfigFileName).string()),
       "restore the quantization_config from the tool that quantized the model",
       "{} tensors look quantized ({}{}) but no quantization config was found (config.json "
       "quantization_config, hf_quant_config.json, quantize_config.json, quant_config.json)",
       quantized.size(), fmt::join(shown, ", "), quantized.size() > shown.size() ? ", ..." : "");
}

}  // namespace qlm::config
