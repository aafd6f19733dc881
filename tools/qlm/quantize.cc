// `qlm quantize MODEL_DIR --to fp8|fp8_per_channel|int8 --out DIR`: writes an 8-bit checkpoint in a
// standard format (quant/online/offline_quantize.h) that qlm, vLLM and transformers load:
// config.json with quantization_config added, the tokenizer and generation files copied, and
// model.safetensors (or model-0000i-of-0000n.safetensors shards with an index above 5 GB).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "quant/online/offline_quantize.h"
#include "tools/qlm/commands.h"

namespace qlm::cli {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kShardBytes = uint64_t{5} << 30;  // transformers' default max_shard_size
constexpr const char* kCopiedFiles[] = {"tokenizer.json",  "tokenizer_config.json", "tokenizer.model",
                                        "special_tokens_map.json", "generation_config.json", "vocab.json",
                                        "merges.txt", "added_tokens.json", "chat_template.jinja"};

struct QuantizeArgs {
  std::string model_dir, to, out;
  bool force = false;
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) fail("cli.write", {.file = path.string(), .tensor = {}, .layer = {}}, "check the output directory", "cannot write");
}

// Splits tensors into shards of at most kShardBytes (a tensor larger than that gets its own).
std::vector<std::vector<std::pair<std::string, Tensor>>> shard(std::vector<std::pair<std::string, Tensor>> tensors,
                                                               uint64_t* total) {
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t in_shard = 0;
  *total = 0;
  for (auto& t : tensors) {
    const uint64_t b = t.second.nbytes();
    *total += b;
    if (in_shard > 0 && in_shard + b > kShardBytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += b;
    shards.back().push_back(std::move(t));
  }
  return shards;
}

void run_quantize(const QuantizeArgs& a) {
  const QuantizeTarget target = parse_quantize_target(a.to);
  const fs::path in(a.model_dir), out(a.out);
  const fs::path config_path = in / "config.json";
  nlohmann::json config = io::read_json_file(config_path);
  if (config.contains("quantization_config") && !config["quantization_config"].is_null())
    fail("cli.already_quantized", {.file = config_path.string(), .tensor = {}, .layer = {}},
         "quantize the float checkpoint the model was made from",
         "the model is already quantized (quantization_config.quant_method = {})",
         config["quantization_config"].value("quant_method", std::string("?")));
  if (fs::exists(out) && !fs::is_empty(out) && !a.force)
    fail("cli.out_exists", {.file = out.string(), .tensor = {}, .layer = {}}, "choose an empty directory or pass --force",
         "output directory is not empty");
  fs::create_directories(out);

  const io::Checkpoint ckpt = io::Checkpoint::open(in);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ckpt.tensor_names()) tensors.emplace_back(name, ckpt.tensor(name));
  QuantizeResult r = quantize_tensors(tensors, target);
  tensors.clear();

  uint64_t total = 0;
  auto shards = shard(std::move(r.tensors), &total);
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  if (shards.size() == 1) {
    io::write_safetensors(out / std::string(io::kSingleFileName), shards[0], meta);
  } else {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      io::write_safetensors(out / file, shards[i], meta);
      for (const auto& [name, _] : shards[i]) map[name] = file;
    }
    index["weight_map"] = map;
    write_text(out / std::string(io::kIndexFileName), index.dump(2) + "\n");
  }
  config["quantization_config"] = r.quantization_config;
  write_text(out / "config.json", config.dump(2) + "\n");
  size_t copied = 0;
  for (const char* f : kCopiedFiles)
    if (fs::exists(in / f)) {
      fs::copy_file(in / f, out / f, fs::copy_options::overwrite_existing);
      ++copied;
    }
  std::printf("quantized %zu linear weights to %s, copied %zu tensors and %zu files; wrote %s (%zu file%s, %.1f MiB)\n",
              r.quantized, quantize_target_name(target), r.copied, copied, out.string().c_str(), shards.size(),
              shards.size() == 1 ? "" : "s", static_cast<double>(total) / (1 << 20));
}

}  // namespace

void register_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "Quantize a float checkpoint to fp8 / int8 and write it in a standard format");
  cmd->add_option("MODEL_DIR", args->model_dir, "Float (f32/f16/bf16) model directory")->required();
  cmd->add_option("--to", args->to, "fp8 (per-tensor, quant_method fp8), fp8_per_channel or int8 (compressed-tensors W8A8)")
      ->required();
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->add_flag("--force", args->force, "Write into a non-empty output directory");
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace qlm::cli
