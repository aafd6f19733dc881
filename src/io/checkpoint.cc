// Checkpoint::open: the index (or the single model.safetensors) decides which files are read
// (S1, S6); each shard is validated as a safetensors file (S5) and cross-checked against the index
// (S2-S4). Only headers are read.
#include "io/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace qlm::io {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRemedyIndex = "fix or regenerate model.safetensors.index.json";

bool has_safetensors_extension(const fs::path& p) { return p.extension() == ".safetensors"; }

// Every *.safetensors entry of the directory (files or symlinks), sorted.
std::vector<std::string> list_safetensors(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (has_safetensors_extension(entry.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_index(const fs::path& path) {
  const ErrorContext where{path.string(), "", ""};
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("checkpoint.index_read", where, "", "cannot read the index: {}", ec.message());
  if (size > kMaxIndexBytes)
    fail("checkpoint.index_read", where, std::string(kRemedyIndex), "the index is {} bytes, above the limit of {}",
         size, kMaxIndexBytes);
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    fail("checkpoint.index_read", where, "", "cannot read the index");
  return text;
}

// True when `inner` (canonical) lies inside directory `outer` (canonical).
bool is_within(const fs::path& inner, const fs::path& outer) {
  const fs::path relative = inner.lexically_relative(outer);
  return !relative.empty() && *relative.begin() != ".." && relative != ".";
}

// S2: the shard exists, is a regular file, and (following symlinks) stays inside the model
// directory. Exception: the Hugging Face hub cache links snapshots/<rev>/<file> to ../../blobs/<hash>,
// so a target inside that cache's blobs/ directory is accepted.
fs::path resolve_shard(const fs::path& dir, const std::string& name, const std::string& index_source,
                       const std::string& first_tensor) {
  const fs::path path = dir / name;
  const ErrorContext where{index_source, first_tensor, ""};
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    fail("checkpoint.missing_shard", where, "download the missing shard, or regenerate the index",
         "shard '{}' named in the index does not exist in {}", name, dir.string());
  if (!fs::is_regular_file(status))
    fail("checkpoint.shard_path", where, std::string(kRemedyIndex), "shard '{}' is not a regular file", name);
  const fs::path canonical_dir = fs::weakly_canonical(dir);
  const fs::path target = fs::weakly_canonical(path);
  if (is_within(target, canonical_dir)) return path;
  const bool in_hub_snapshot = canonical_dir.parent_path().filename() == "snapshots";
  if (in_hub_snapshot && is_within(target, canonical_dir.parent_path().parent_path() / "blobs")) return path;
  fail("checkpoint.shard_path", where, "copy the file into the model directory",
       "shard '{}' is a symlink resolving to {}, outside the model directory {}", name, target.string(),
       canonical_dir.string());
}

}  // namespace

Checkpoint Checkpoint::open(const std::filesystem::path& model_dir) {
  Checkpoint checkpoint;
  checkpoint.dir_ = model_dir;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    fail("checkpoint.not_a_directory", ErrorContext{model_dir.string(), "", ""}, "pass the model directory",
         "not a directory");

  const fs::path index_path = model_dir / kIndexFileName;
  const std::vector<std::string> present = list_safetensors(model_dir);
  std::vector<std::string> shard_names;
  std::map<std::string, std::string, std::less<>> shard_of;  // tensor -> shard, from the index
  std::optional<uint64_t> total_size;
  const std::string index_source = index_path.string();
  const bool have_index = fs::exists(index_path, ec);

  if (have_index) {
    // S1: the index alone decides the file list.
    CheckpointIndex index = parse_index_json(read_index(index_path), index_source);
    checkpoint.warnings_ = std::move(index.warnings);
    total_size = index.total_size;
    std::map<std::string, std::string> first_tensor_of_shard;
    for (auto& [tensor, shard] : index.weight_map) {
      first_tensor_of_shard.emplace(shard, tensor);
      shard_of.emplace(tensor, shard);
    }
    for (const auto& [shard, first_tensor] : first_tensor_of_shard) {
      resolve_shard(model_dir, shard, index_source, first_tensor);
      shard_names.push_back(shard);
    }
  } else {
    // S6
    if (std::find(present.begin(), present.end(), kSingleFileName) == present.end()) {
      if (present.empty())
        fail("checkpoint.no_weights", ErrorContext{model_dir.string(), "", ""},
             "download the model's .safetensors weights (pickle .bin files are not supported)",
             "no {} and no {} in the directory", kSingleFileName, kIndexFileName);
      fail("checkpoint.no_index", ErrorContext{model_dir.string(), "", ""},
           "add the model's model.safetensors.index.json, or name a single weights file model.safetensors",
           "found {} safetensors file(s) ({}) but no {}; without an index only a single model.safetensors is "
           "loaded, so the file list would be a guess",
           present.size(), fmt::join(present, ", "), kIndexFileName);
    }
    resolve_shard(model_dir, std::string(kSingleFileName), (model_dir / kSingleFileName).string(), "");
    shard_names.emplace_back(kSingleFileName);
  }

  for (const std::string& name : present)
    if (std::find(shard_names.begin(), shard_names.end(), name) == shard_names.end())
      checkpoint.warnings_.push_back(fmt::format("stray file {} is not listed in {}; ignored", name,
                                                 have_index ? std::string(kIndexFileName) : std::string(kSingleFileName)));

  // S5: each shard passes the container rules on its own.
  for (const std::string& name : shard_names)
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(model_dir / name)));

  auto file_index_of = [&](std::string_view shard) {
    return static_cast<size_t>(std::find(shard_names.begin(), shard_names.end(), shard) - shard_names.begin());
  };
  if (have_index) {
    // S3, index -> shard.
    for (const auto& [tensor, shard] : shard_of) {
      const SafetensorsFile& file = *checkpoint.files_[file_index_of(shard)];
      if (file.find(tensor) != nullptr) continue;
      std::string elsewhere;
      for (size_t i = 0; i < shard_names.size(); ++i)
        if (checkpoint.files_[i]->find(tensor) != nullptr) elsewhere = shard_names[i];
      fail("checkpoint.missing_in_shard", ErrorContext{index_source, tensor, ""}, std::string(kRemedyIndex),
           "the index maps this tensor to '{}', but that shard does not contain it{}", shard,
           elsewhere.empty() ? std::string() : fmt::format(" (it is in '{}')", elsewhere));
    }
  }
  uint64_t tensor_bytes = 0;
  for (size_t i = 0; i < checkpoint.files_.size(); ++i) {
    for (const TensorInfo& t : checkpoint.files_[i]->tensors()) {
      tensor_bytes += t.nbytes();
      if (have_index) {
        auto listed = shard_of.find(t.name);
        // S3, shard -> index.
        if (listed == shard_of.end())
          fail("checkpoint.unlisted_tensor", ErrorContext{checkpoint.files_[i]->source_name(), t.name, ""},
               std::string(kRemedyIndex), "shard '{}' contains this tensor, but {} does not list it", shard_names[i],
               kIndexFileName);
        // S4: listed for another shard that also holds it (checked above), so two shards have it.
        if (listed->second != shard_names[i])
          fail("checkpoint.duplicate_tensor", ErrorContext{index_source, t.name, ""},
               "remove the duplicate from one shard, or regenerate the checkpoint",
               "tensor is present in two shards, '{}' (the one the index names) and '{}'", listed->second,
               shard_names[i]);
      }
      checkpoint.by_name_.emplace_back(t.name, i);
    }
  }
  std::sort(checkpoint.by_name_.begin(), checkpoint.by_name_.end());
  // Without an index there is one file, whose header already rejects duplicate names (R15).

  if (total_size && *total_size != tensor_bytes)
    checkpoint.warnings_.push_back(fmt::format("{}: metadata.total_size is {} but the shards' tensors hold {} bytes",
                                               index_source, *total_size, tensor_bytes));
  return checkpoint;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, file] : by_name_) names.push_back(name);
  return names;
}

size_t Checkpoint::tensor_count() const { return by_name_.size(); }

namespace {
template <typename Entries>
auto find_entry(const Entries& entries, std::string_view name) {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const auto& entry, std::string_view key) { return entry.first < key; });
  return (it != entries.end() && it->first == name) ? it : entries.end();
}
}  // namespace

bool Checkpoint::contains(std::string_view name) const { return find_entry(by_name_, name) != by_name_.end(); }

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const {
  auto it = find_entry(by_name_, name);
  if (it == by_name_.end())
    fail("checkpoint.missing_tensor", ErrorContext{dir_.string(), std::string(name), ""}, "",
         "the checkpoint has no tensor of this name ({} tensors)", by_name_.size());
  return *files_[it->second];
}

const TensorInfo& Checkpoint::info(std::string_view name) const { return file_of(name).info(name); }

Tensor Checkpoint::tensor(std::string_view name) const { return file_of(name).tensor(name); }

}  // namespace qlm::io
