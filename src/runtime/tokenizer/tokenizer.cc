// Choosing the tokenizer file of a model directory and resolving its BOS/EOS ids.
#include "runtime/tokenizer/tokenizer.h"

#include "core/error.h"
#include "io/json.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/sentencepiece_tokenizer.h"

namespace qlm::runtime {
namespace {

using Json = nlohmann::json;

// A model-directory JSON file that may be absent.
struct ConfigFile {
  std::filesystem::path path;
  Json doc;  // null when the file does not exist

  static ConfigFile read(const std::filesystem::path& path) {
    ConfigFile file{path, nullptr};
    if (std::filesystem::exists(path)) file.doc = io::read_json_file(path);
    return file;
  }

  const Json* member(std::string_view key) const {
    if (!doc.is_object()) return nullptr;
    const auto it = doc.find(key);
    return it == doc.end() || it->is_null() ? nullptr : &*it;
  }

  [[noreturn]] void fail_field(std::string_view key, std::string_view expected) const {
    fail("tokenizer.field", ErrorContext{path.string(), "", ""}, "", "field {} must be {}, found {}", key, expected,
         io::json_type_name(*member(key)));
  }

  // An id field written as an integer or a list of integers ("eos_token_id": [1, 2]).
  std::optional<std::vector<int32_t>> ids(std::string_view key) const {
    const Json* value = member(key);
    if (value == nullptr) return std::nullopt;
    std::vector<int32_t> out;
    const auto take = [&](const Json& item) {
      if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT32_MAX)
        fail_field(key, "a token id or a list of token ids");
      out.push_back(static_cast<int32_t>(item.get<int64_t>()));
    };
    if (value->is_array()) {
      for (const Json& item : *value) take(item);
    } else {
      take(*value);
    }
    return out;
  }

  // A token written as "<s>" or {"content": "<s>", ...} (tokenizer_config.json).
  std::optional<std::string> token(std::string_view key) const {
    const Json* value = member(key);
    if (value == nullptr) return std::nullopt;
    if (value->is_string()) return value->get<std::string>();
    if (value->is_object() && value->contains("content") && (*value)["content"].is_string())
      return (*value)["content"].get<std::string>();
    fail_field(key, "a token string or {\"content\": ...}");
  }

  bool flag(std::string_view key, bool fallback) const {
    const Json* value = member(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail_field(key, "a boolean");
    return value->get<bool>();
  }
};

}  // namespace

// Fills in the ids of a loaded tokenizer: generation_config.json, then config.json, then the
// token named in tokenizer_config.json, then what the tokenizer file itself implies.
class SpecialIdsLoader {
 public:
  static void load(Tokenizer& tokenizer, const std::filesystem::path& dir, const ConfigFile& tokenizer_config) {
    const ConfigFile generation = ConfigFile::read(dir / "generation_config.json");
    const ConfigFile config = ConfigFile::read(dir / "config.json");

    const auto named = [&](std::string_view key) -> std::optional<std::vector<int32_t>> {
      const auto name = tokenizer_config.token(key);
      if (!name) return std::nullopt;
      const auto id = tokenizer.token_to_id(*name);
      if (!id) return std::nullopt;
      return std::vector<int32_t>{*id};
    };

    std::optional<std::vector<int32_t>> bos = generation.ids("bos_token_id");
    if (!bos) bos = config.ids("bos_token_id");
    if (!bos) bos = named("bos_token");
    if (bos && !bos->empty()) tokenizer.bos_id_ = bos->front();
    else if (const auto fallback = tokenizer.default_bos_id()) tokenizer.bos_id_ = *fallback;

    std::optional<std::vector<int32_t>> eos = generation.ids("eos_token_id");
    if (!eos) eos = config.ids("eos_token_id");
    if (!eos) eos = named("eos_token");
    tokenizer.eos_ids_ = eos ? *eos : tokenizer.default_eos_ids();
  }
};

std::unique_ptr<Tokenizer> Tokenizer::from_model_dir(const std::filesystem::path& path) {
  std::filesystem::path dir = path;
  std::filesystem::path json_file = path / "tokenizer.json";
  std::filesystem::path model_file = path / "tokenizer.model";
  if (std::filesystem::is_regular_file(path)) {
    dir = path.parent_path();
    json_file = path.extension() == ".json" ? path : std::filesystem::path();
    model_file = path.extension() == ".json" ? std::filesystem::path() : path;
  }
  const ConfigFile tokenizer_config = ConfigFile::read(dir / "tokenizer_config.json");

  std::unique_ptr<Tokenizer> tokenizer;
  if (!json_file.empty() && std::filesystem::exists(json_file)) {
    tokenizer = tok::HfTokenizer::load(json_file);
  } else if (!model_file.empty() && std::filesystem::exists(model_file)) {
    tokenizer = tok::SentencePieceTokenizer::load(model_file, tokenizer_config.flag("add_bos_token", true),
                                                  tokenizer_config.flag("add_eos_token", false));
  } else {
    fail("tokenizer.missing", ErrorContext{path.string(), "", ""},
         "the model directory must contain tokenizer.json or tokenizer.model (copy them from the original model)",
         "no tokenizer.json or tokenizer.model found");
  }
  SpecialIdsLoader::load(*tokenizer, dir, tokenizer_config);
  return tokenizer;
}

}  // namespace qlm::runtime
