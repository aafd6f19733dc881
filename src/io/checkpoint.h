// A model directory's weights: one model.safetensors, or shards listed by
// model.safetensors.index.json (rules S1-S6 of shared/reference/RELIABILITY.md §B.2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace qlm::io {

inline constexpr std::string_view kIndexFileName = "model.safetensors.index.json";
inline constexpr std::string_view kSingleFileName = "model.safetensors";
inline constexpr uint64_t kMaxIndexBytes = 100'000'000;

// The parsed model.safetensors.index.json.
struct CheckpointIndex {
  // tensor name -> shard file name, sorted by tensor name. Shard names have passed the syntactic
  // part of S2 (plain relative file names).
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::optional<uint64_t> total_size;  // metadata.total_size when it is a non-negative integer
  std::vector<std::string> warnings;   // e.g. a malformed metadata.total_size
};

// Parses and validates index JSON text (no file access, so it can be fuzzed). `source` names the
// index in errors: "checkpoint.index_json", "checkpoint.duplicate_key", "checkpoint.too_deep",
// "checkpoint.weight_map", "checkpoint.shard_path".
CheckpointIndex parse_index_json(std::string_view text, const std::string& source);

class Checkpoint {
 public:
  // Opens and validates every shard header (headers only: no tensor data is read). Throws
  // "checkpoint.<rule>" errors naming the index, the shard and the tensor.
  static Checkpoint open(const std::filesystem::path& model_dir);

  const std::filesystem::path& directory() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // All tensor names, sorted.
  std::vector<std::string> tensor_names() const;
  size_t tensor_count() const;
  bool contains(std::string_view name) const;
  const TensorInfo& info(std::string_view name) const;  // "checkpoint.missing_tensor" if absent
  const SafetensorsFile& file_of(std::string_view name) const;
  Tensor tensor(std::string_view name) const;
  // Non-fatal findings (S5 total_size mismatch, ...), for `qlm inspect` and the loader's report.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::pair<std::string, size_t>> by_name_;  // sorted name -> index into files_
  std::vector<std::string> warnings_;
};

}  // namespace qlm::io
