// parse_index_json: model.safetensors.index.json text -> validated weight map (S1, S2 syntax).
#include <algorithm>

#include "io/checkpoint.h"
#include "io/guarded_json.h"
#include "io/utf8.h"

namespace qlm::io {
namespace {

constexpr std::string_view kRemedyIndex = "fix or regenerate model.safetensors.index.json";

// S2 (syntactic part): a shard is named by a plain file name inside the model directory.
void check_shard_name(const std::string& shard, const std::string& tensor, const std::string& source) {
  const ErrorContext where{source, tensor, ""};
  if (shard.empty()) fail("checkpoint.shard_path", where, std::string(kRemedyIndex), "the shard file name is empty");
  if (shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos)
    fail("checkpoint.shard_path", where, std::string(kRemedyIndex),
         "shard '{}' is a path; shards must be plain file names inside the model directory (no '/' or '\\\\')",
         shard);
  if (shard == "." || shard == "..")
    fail("checkpoint.shard_path", where, std::string(kRemedyIndex), "shard '{}' is not a file name", shard);
  if (shard.find('\0') != std::string::npos)
    fail("checkpoint.shard_path", where, std::string(kRemedyIndex), "shard name contains a NUL byte");
}

}  // namespace

CheckpointIndex parse_index_json(std::string_view text, const std::string& source) {
  const ErrorContext where{source, "", ""};
  if (auto bad = first_invalid_utf8(text))
    fail("checkpoint.index_json", where, std::string(kRemedyIndex), "the index is not valid UTF-8 (byte offset {})",
         *bad);
  auto parsed = parse_guarded_json(text);
  if (auto* failure = std::get_if<JsonFailure>(&parsed)) {
    switch (failure->kind) {
      case JsonFailure::Kind::duplicate_key:
        fail("checkpoint.duplicate_key", ErrorContext{source, failure->key_path == "weight_map" ? failure->detail : "", ""},
             std::string(kRemedyIndex), "duplicate key '{}' in '{}' (a tensor listed twice is ambiguous)",
             failure->detail, failure->key_path.empty() ? "<top level>" : failure->key_path);
      case JsonFailure::Kind::too_deep:
        fail("checkpoint.too_deep", where, std::string(kRemedyIndex), "the index has {}", failure->detail);
      case JsonFailure::Kind::syntax:
        fail("checkpoint.index_json", where, std::string(kRemedyIndex), "the index is not valid JSON: {}",
             failure->detail);
    }
  }
  const nlohmann::json& root = std::get<nlohmann::json>(parsed);
  if (!root.is_object())
    fail("checkpoint.index_json", where, std::string(kRemedyIndex), "the index must be a JSON object, found {}",
         json_kind(root));

  CheckpointIndex index;
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end())
    fail("checkpoint.weight_map", where, std::string(kRemedyIndex), "the index has no 'weight_map'");
  if (!weight_map->is_object())
    fail("checkpoint.weight_map", where, std::string(kRemedyIndex),
         "'weight_map' must be an object mapping tensor names to shard file names, found {} {}",
         json_kind(*weight_map), json_excerpt(*weight_map));
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string())
      fail("checkpoint.weight_map", ErrorContext{source, tensor, ""}, std::string(kRemedyIndex),
           "weight_map value must be a shard file name (string), found {} {}", json_kind(shard), json_excerpt(shard));
    std::string shard_name = shard.get<std::string>();
    check_shard_name(shard_name, tensor, source);
    index.weight_map.emplace_back(tensor, std::move(shard_name));
  }
  // nlohmann objects iterate in key order already; keep the guarantee explicit.
  std::sort(index.weight_map.begin(), index.weight_map.end());

  auto metadata = root.find("metadata");
  if (metadata != root.end() && !metadata->is_null()) {
    if (!metadata->is_object()) {
      index.warnings.push_back(fmt::format("{}: 'metadata' is a {}, not an object; ignored", source, json_kind(*metadata)));
    } else if (auto total = metadata->find("total_size"); total != metadata->end()) {
      if (total->is_number_unsigned()) {
        index.total_size = total->get<uint64_t>();
      } else {
        index.warnings.push_back(fmt::format("{}: metadata.total_size is {} {}, not a non-negative integer; ignored",
                                             source, json_kind(*total), json_excerpt(*total)));
      }
    }
  }
  return index;
}

}  // namespace qlm::io
