// Sharded checkpoints: one test per rule S1-S6 (RELIABILITY.md §B.2), corpus item 15 (§B.5), the
// index parser, and lookups.
#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::io {
namespace {

namespace fs = std::filesystem;
using qlm::testing::TempDir;

// Writes a shard holding F32[2] tensors with the given names.
void write_shard(const fs::path& path, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& name : names) tensors.emplace_back(name, Tensor::from_vector<float>({1.0f, 2.0f}, {2}));
  write_safetensors(path, tensors);
}

std::string index_json(const std::vector<std::pair<std::string, std::string>>& weight_map,
                       std::string_view metadata = R"({"total_size": 16})") {
  std::string members;
  for (const auto& [tensor, shard] : weight_map)
    members += fmt::format("{}\"{}\": \"{}\"", members.empty() ? "" : ", ", tensor, shard);
  return fmt::format(R"({{"metadata": {}, "weight_map": {{{}}}}})", metadata, members);
}

// Two shards: a.weight in 00001, b.weight in 00002 (16 bytes in all).
struct ShardedDir {
  TempDir dir{"qlm-ckpt"};
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  ShardedDir() {
    write_shard(dir / shard1, {"a.weight"});
    write_shard(dir / shard2, {"b.weight"});
  }
  void write_index(const std::vector<std::pair<std::string, std::string>>& weight_map,
                   std::string_view metadata = R"({"total_size": 16})") const {
    dir.write("model.safetensors.index.json", index_json(weight_map, metadata));
  }
  void write_default_index() const { write_index({{"a.weight", shard1}, {"b.weight", shard2}}); }
};

bool has_warning(const Checkpoint& checkpoint, std::string_view fragment) {
  for (const auto& warning : checkpoint.warnings())
    if (warning.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(CheckpointRules, ShardedCheckpointOpensAndLooksUpTensors) {
  ShardedDir d;
  d.write_default_index();
  Checkpoint checkpoint = Checkpoint::open(d.dir.path());
  EXPECT_EQ(checkpoint.files().size(), 2u);
  EXPECT_EQ(checkpoint.tensor_names(), (std::vector<std::string>{"a.weight", "b.weight"}));
  EXPECT_EQ(checkpoint.tensor_count(), 2u);
  EXPECT_TRUE(checkpoint.contains("b.weight"));
  EXPECT_FALSE(checkpoint.contains("c.weight"));
  EXPECT_EQ(checkpoint.info("b.weight").shape, (Shape{2}));
  EXPECT_NE(checkpoint.file_of("b.weight").source_name().find(d.shard2), std::string::npos);
  EXPECT_EQ(checkpoint.tensor("a.weight").to_float_vector(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_TRUE(checkpoint.warnings().empty());
  EXPECT_QLM_ERROR(checkpoint.info("c.weight"), "checkpoint.missing_tensor", "'c.weight'");
}

TEST(CheckpointRules, S1_IndexIsTheOnlySourceOfFiles) {
  ShardedDir d;
  d.write_default_index();
  write_shard(d.dir / "extra.safetensors", {"c.weight"});
  Checkpoint checkpoint = Checkpoint::open(d.dir.path());
  EXPECT_FALSE(checkpoint.contains("c.weight"));  // not globbed
  EXPECT_EQ(checkpoint.files().size(), 2u);
  EXPECT_TRUE(has_warning(checkpoint, "stray file extra.safetensors is not listed"));
}

TEST(CheckpointRules, S2_ShardsArePlainExistingFilesInsideTheDirectory) {
  ShardedDir d;
  d.write_index({{"a.weight", d.shard1}, {"b.weight", "model-00003-of-00002.safetensors"}});
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.missing_shard",
                   "shard 'model-00003-of-00002.safetensors' named in the index does not exist");
  d.write_index({{"a.weight", d.shard1}, {"b.weight", "../" + d.shard2}});
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.shard_path", "shards must be plain file names");
}

TEST(CheckpointRules, S2_SymlinkEscapingTheDirectoryIsRejected) {
  TempDir outside{"qlm-outside"};
  write_shard(outside / "evil.safetensors", {"b.weight"});
  ShardedDir d;
  fs::remove(d.dir / d.shard2);
  fs::create_symlink(outside / "evil.safetensors", d.dir / d.shard2);
  d.write_default_index();
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.shard_path", "outside the model directory");
  // A link that stays inside the directory is fine.
  fs::remove(d.dir / d.shard2);
  fs::create_directory(d.dir / "blobs");
  write_shard(d.dir / "blobs" / "b", {"b.weight"});
  fs::create_symlink("blobs/b", d.dir / d.shard2);
  EXPECT_EQ(Checkpoint::open(d.dir.path()).tensor_count(), 2u);
}

TEST(CheckpointRules, S2_HuggingFaceHubCacheLayoutIsAccepted) {
  TempDir cache{"qlm-hub"};
  fs::create_directories(cache / "blobs");
  fs::create_directories(cache / "snapshots" / "abc123");
  write_shard(cache / "blobs" / "0123456789abcdef", {"w"});
  fs::create_symlink("../../blobs/0123456789abcdef", cache.path() / "snapshots" / "abc123" / "model.safetensors");
  EXPECT_EQ(Checkpoint::open(cache.path() / "snapshots" / "abc123").tensor_names(), (std::vector<std::string>{"w"}));
}

TEST(CheckpointRules, S3_IndexAndShardsAgreeBothWays) {
  ShardedDir d;
  d.write_index({{"a.weight", d.shard1}, {"b.weight", d.shard2}, {"c.weight", d.shard2}});
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.missing_in_shard",
                   "tensor 'c.weight': the index maps this tensor to 'model-00002-of-00002.safetensors'");
  d.write_index({{"a.weight", d.shard1}});
  write_shard(d.dir / d.shard1, {"a.weight", "z.weight"});
  d.write_index({{"a.weight", d.shard1}, {"b.weight", d.shard2}});
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.unlisted_tensor",
                   "tensor 'z.weight': shard 'model-00001-of-00002.safetensors' contains this tensor, but");
}

TEST(CheckpointRules, S3_TensorMappedToTheWrongShardNamesWhereItIs) {
  ShardedDir d;
  d.write_index({{"a.weight", d.shard2}, {"b.weight", d.shard1}});
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.missing_in_shard",
                   "(it is in 'model-00001-of-00002.safetensors')");
}

TEST(CheckpointRules, S4_TensorInTwoShardsIsAnError) {
  ShardedDir d;
  write_shard(d.dir / d.shard2, {"a.weight", "b.weight"});
  d.write_default_index();
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.duplicate_tensor",
                   "tensor 'a.weight': tensor is present in two shards");
  // A tensor listed twice in the index is a duplicate JSON key.
  d.dir.write("model.safetensors.index.json",
              fmt::format(R"({{"weight_map": {{"a.weight": "{}", "a.weight": "{}"}}}})", d.shard1, d.shard2));
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.duplicate_key", "duplicate key 'a.weight' in 'weight_map'");
}

TEST(CheckpointRules, S5_EachShardPassesContainerRulesAndTotalSizeIsChecked) {
  ShardedDir d;
  d.write_default_index();
  // Truncate shard 2 by one byte: its own container validation fails.
  fs::resize_file(d.dir / d.shard2, fs::file_size(d.dir / d.shard2) - 1);
  EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "safetensors.coverage", d.shard2);

  ShardedDir e;
  e.write_index({{"a.weight", e.shard1}, {"b.weight", e.shard2}}, R"({"total_size": 999})");
  Checkpoint checkpoint = Checkpoint::open(e.dir.path());
  EXPECT_TRUE(has_warning(checkpoint, "metadata.total_size is 999 but the shards' tensors hold 16 bytes"));
  e.write_index({{"a.weight", e.shard1}, {"b.weight", e.shard2}}, R"({"total_size": "16"})");
  EXPECT_TRUE(has_warning(Checkpoint::open(e.dir.path()), "not a non-negative integer; ignored"));
}

TEST(CheckpointRules, S6_WithoutIndexExactlyOneModelSafetensors) {
  TempDir dir;
  EXPECT_QLM_ERROR(Checkpoint::open(dir.path()), "checkpoint.no_weights", "no model.safetensors");
  write_shard(dir / "model-00001-of-00002.safetensors", {"a"});
  write_shard(dir / "model-00002-of-00002.safetensors", {"b"});
  EXPECT_QLM_ERROR(Checkpoint::open(dir.path()), "checkpoint.no_index",
                   "found 2 safetensors file(s) (model-00001-of-00002.safetensors, model-00002-of-00002.safetensors)");
  write_shard(dir / "model.safetensors", {"w"});
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.tensor_names(), (std::vector<std::string>{"w"}));
  EXPECT_TRUE(has_warning(checkpoint, "stray file model-00001-of-00002.safetensors"));
  EXPECT_QLM_ERROR(Checkpoint::open(dir / "model.safetensors"), "checkpoint.not_a_directory", "not a directory");
}

TEST(CheckpointCorpus, Item15_ShardingFaults) {
  {  // index names a missing shard
    ShardedDir d;
    fs::remove(d.dir / d.shard2);
    d.write_default_index();
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.missing_shard", "does not exist");
  }
  {  // index omits a tensor present in a shard
    ShardedDir d;
    write_shard(d.dir / d.shard2, {"b.weight", "b.bias"});
    d.write_default_index();
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.unlisted_tensor", "tensor 'b.bias'");
  }
  {  // tensor in two shards
    ShardedDir d;
    write_shard(d.dir / d.shard1, {"a.weight", "b.weight"});
    d.write_default_index();
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.duplicate_tensor", "present in two shards");
  }
  {  // ../ and absolute shard paths
    ShardedDir d;
    d.write_index({{"a.weight", "../x.safetensors"}, {"b.weight", d.shard2}});
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.shard_path", "'../x.safetensors' is a path");
    d.write_index({{"a.weight", (d.dir / d.shard1).string()}, {"b.weight", d.shard2}});
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.shard_path", "is a path");
    d.write_index({{"a.weight", ".."}, {"b.weight", d.shard2}});
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.shard_path", "not a file name");
  }
  {  // stray extra shard: a warning, not an error
    ShardedDir d;
    d.write_default_index();
    write_shard(d.dir / "model-00003-of-00002.safetensors", {"c.weight"});
    EXPECT_TRUE(has_warning(Checkpoint::open(d.dir.path()), "stray file model-00003-of-00002.safetensors"));
  }
  {  // weight_map not an object
    ShardedDir d;
    d.dir.write("model.safetensors.index.json", R"({"weight_map": ["a.weight"]})");
    EXPECT_QLM_ERROR(Checkpoint::open(d.dir.path()), "checkpoint.weight_map", "'weight_map' must be an object");
  }
}

TEST(CheckpointIndexParser, ValidatesStructureTypesAndNames) {
  const CheckpointIndex index =
      parse_index_json(R"({"metadata":{"total_size":8},"weight_map":{"b":"s2.safetensors","a":"s1.safetensors"}})", "idx");
  EXPECT_EQ(index.weight_map, (std::vector<std::pair<std::string, std::string>>{{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}));
  EXPECT_EQ(index.total_size, 8u);
  EXPECT_QLM_ERROR(parse_index_json("{", "idx"), "checkpoint.index_json", "not valid JSON");
  EXPECT_QLM_ERROR(parse_index_json("[]", "idx"), "checkpoint.index_json", "must be a JSON object");
  EXPECT_QLM_ERROR(parse_index_json("{}", "idx"), "checkpoint.weight_map", "has no 'weight_map'");
  EXPECT_QLM_ERROR(parse_index_json(R"({"weight_map":"s.safetensors"})", "idx"), "checkpoint.weight_map", "found string");
  EXPECT_QLM_ERROR(parse_index_json(R"({"weight_map":{"a":1}})", "idx"), "checkpoint.weight_map",
                   "tensor 'a': weight_map value must be a shard file name (string), found unsigned integer");
  EXPECT_QLM_ERROR(parse_index_json(R"({"weight_map":{"a":""}})", "idx"), "checkpoint.shard_path", "empty");
  EXPECT_QLM_ERROR(parse_index_json(R"({"weight_map":{"a":"sub\\s.safetensors"}})", "idx"), "checkpoint.shard_path", "is a path");
  EXPECT_QLM_ERROR(parse_index_json("{\"weight_map\":{\"a\":\"\xFF\"}}", "idx"), "checkpoint.index_json", "not valid UTF-8");
  EXPECT_QLM_ERROR(parse_index_json(R"({"metadata":{"x":)" + std::string(1000, '[') + std::string(1000, ']') + "}}", "idx"),
                   "checkpoint.too_deep", "deeper than 64");
  EXPECT_QLM_ERROR(parse_index_json(R"({"weight_map":{},"weight_map":{}})", "idx"), "checkpoint.duplicate_key",
                   "<top level>");
  EXPECT_EQ(parse_index_json(R"({"metadata":[1],"weight_map":{}})", "idx").warnings.size(), 1u);
}

TEST(CheckpointRules, OpenReadsHeadersOnly) {
  // A 4 GiB sparse shard opens instantly: open() never touches tensor bytes.
  TempDir dir;
  const uint64_t bytes = uint64_t{4} << 30;
  const std::string header = fmt::format(R"({{"big":{{"dtype":"U8","shape":[{}],"data_offsets":[0,{}]}}}})", bytes, bytes);
  std::string image;
  for (int i = 0; i < 8; ++i) image.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  image += header;
  const auto path = dir.write("model.safetensors", image);
  fs::resize_file(path, image.size() + bytes);
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.info("big").nbytes(), bytes);
}

}  // namespace
}  // namespace qlm::io
