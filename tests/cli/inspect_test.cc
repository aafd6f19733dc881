// Runs the built `qlm` binary on models/tiny-gptq and on broken copies of it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/wait.h>

#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace {

using RunResult = qlm::testing::QlmRun;
using qlm::testing::run_qlm;

namespace fs = std::filesystem;
using qlm::testing::TempDir;

const fs::path kQlm = fs::path(QLM_BINARY_DIR) / "qlm";
const fs::path kTinyGptq = fs::path(QLM_SOURCE_DIR) / "models" / "tiny-gptq";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

// A copy of tiny-gptq whose config.json is replaced by `config_text`.
void copy_tiny_gptq(const TempDir& dir, const std::string& config_text = "") {
  fs::copy_file(kTinyGptq / "model.safetensors", dir / "model.safetensors");
  if (config_text.empty())
    fs::copy_file(kTinyGptq / "config.json", dir / "config.json");
  else
    dir.write("config.json", config_text);
}

TEST(InspectCli, TextOutput) {
  ASSERT_TRUE(fs::exists(kQlm)) << kQlm;
  RunResult r = run_qlm("inspect " + quoted(kTinyGptq));
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* piece :
       {"architecture: LlamaForCausalLM", "model_type:   llama", "dtype:        float16",
        "layers 2, hidden 64, intermediate 128, heads 4, kv heads 2, head_dim 16, vocab 256",
        "quantization: gptq (from config.json: quantization_config)", "  bits: 4", "  group_size: 32",
        "  sym: true", "  desc_act: false", "  checkpoint_format: \"gptq\"", "tensors: 63 in 1 file,",
        "GPTQ/AWQ packed", "dense float", "warnings: none"}) {
    EXPECT_TRUE(contains(r.out, piece)) << "missing '" << piece << "' in:\n" << r.out;
  }
  EXPECT_FALSE(contains(r.out, "errors:")) << r.out;
}

TEST(InspectCli, JsonOutput) {
  RunResult r = run_qlm("inspect --json " + quoted(kTinyGptq));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["config"]["model_type"], "llama");
  EXPECT_EQ(j["config"]["dtype"], "float16");
  EXPECT_EQ(j["config"]["num_hidden_layers"], 2);
  EXPECT_EQ(j["config"]["hidden_size"], 64);
  EXPECT_EQ(j["config"]["intermediate_size"], 128);
  EXPECT_EQ(j["config"]["num_key_value_heads"], 2);
  EXPECT_EQ(j["config"]["vocab_size"], 256);

  const auto& q = j["quantization"];
  EXPECT_EQ(q["quant_method"], "gptq");
  EXPECT_EQ(q["origins"], nlohmann::json::array({"config.json: quantization_config"}));
  EXPECT_EQ(q["fields"]["bits"], 4);
  EXPECT_EQ(q["fields"]["group_size"], 32);
  EXPECT_EQ(q["fields"]["sym"], true);
  EXPECT_EQ(q["fields"]["desc_act"], false);
  EXPECT_EQ(q["fields"]["checkpoint_format"], "gptq");
  EXPECT_TRUE(q["config"].is_object());

  // 7 linears x 4 tensors x 2 layers packed; embed, lm_head, final norm and 2 norms per layer dense.
  const auto& t = j["tensors"];
  EXPECT_EQ(t["count"], 63);
  EXPECT_EQ(t["files"], 1);
  EXPECT_EQ(t["by_format"]["gptq_awq_packed"]["count"], 56);
  EXPECT_EQ(t["by_format"]["dense"]["count"], 7);
  EXPECT_EQ(t["by_dtype"]["I32"]["count"], 42);  // qweight, qzeros, g_idx
  EXPECT_EQ(t["by_dtype"]["F16"]["count"], 21);  // scales + dense
  uint64_t sum = 0;
  for (const auto& [key, tally] : t["by_format"].items()) sum += tally["bytes"].get<uint64_t>();
  EXPECT_EQ(sum, t["bytes"].get<uint64_t>());
  EXPECT_EQ(t["bytes"].get<uint64_t>() + 8 < fs::file_size(kTinyGptq / "model.safetensors"), true);
  EXPECT_TRUE(j["warnings"].empty()) << j["warnings"];
  EXPECT_TRUE(j["errors"].empty()) << j["errors"];
  EXPECT_FALSE(j.contains("verify"));
}

TEST(InspectCli, VerifyData) {
  RunResult r = run_qlm("inspect --json --verify-data " + quoted(kTinyGptq));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verify"]["bytes"], j["tensors"]["bytes"]);
  ASSERT_EQ(j["verify"]["files"].size(), 1u);
  EXPECT_EQ(j["verify"]["files"][0]["checksum"].get<std::string>().size(), 16u);
  RunResult text = run_qlm("inspect --verify-data " + quoted(kTinyGptq));
  EXPECT_TRUE(contains(text.out, "verify-data: read")) << text.out;
}

TEST(InspectCli, WarnsWhenConfigAndTensorsDisagree) {
  TempDir dir("qlm-inspect");
  std::ifstream in(kTinyGptq / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"bits", "4"}};
  copy_tiny_gptq(dir, config.dump());
  RunResult r = run_qlm("inspect --json " + quoted(dir.path()));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::string warnings = j["warnings"].dump();
  EXPECT_TRUE(contains(warnings, "no FP8 weights")) << warnings;
  EXPECT_TRUE(contains(warnings, "GPTQ/AWQ tensors (.qweight, ...) are present but quant_method is")) << warnings;
  EXPECT_TRUE(contains(warnings, "quantization_config.bits: expected integer, found string \\\"4\\\""))
      << warnings;
}

TEST(InspectCli, SummarizesCompressedTensorsAndModelOptConfigs) {
  TempDir dir("qlm-inspect");
  std::ifstream in(kTinyGptq / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["quantization_config"] = nlohmann::json::parse(R"({
      "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
          "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}}},
      "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false},
      "quantization_status": "compressed"})");
  copy_tiny_gptq(dir, config.dump());
  nlohmann::json j = nlohmann::json::parse(run_qlm("inspect --json " + quoted(dir.path())).out);
  const auto& q = j["quantization"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["fields"]["ignore"], nlohmann::json::array({"lm_head"}));
  EXPECT_EQ(q["fields"]["kv_cache_scheme"], "float8 strategy=tensor dynamic=false");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"], "int4 sym strategy=group group_size=128");
  EXPECT_EQ(q["config_groups"]["group_0"]["input_activations"], "none");
  EXPECT_EQ(q["other_keys"], nlohmann::json::array({"quantization_status"}));

  config.erase("quantization_config");
  dir.write("config.json", config.dump());
  dir.write("hf_quant_config.json", R"({"producer": {"name": "modelopt"},
      "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}})");
  j = nlohmann::json::parse(run_qlm("inspect --json " + quoted(dir.path())).out);
  EXPECT_EQ(j["quantization"]["quant_method"], "modelopt");
  EXPECT_EQ(j["quantization"]["origins"], nlohmann::json::array({"hf_quant_config.json"}));
  EXPECT_EQ(j["quantization"]["fields"]["quantization.quant_algo"], "FP8");
  EXPECT_EQ(j["quantization"]["fields"]["quantization.exclude_modules"], nlohmann::json::array({"lm_head"}));
  EXPECT_TRUE(contains(j["warnings"].dump(), "no FP8 or packed FP4 weights")) << j["warnings"];
}

TEST(InspectCli, MissingQuantizationConfigIsAnError) {
  TempDir dir("qlm-inspect");
  std::ifstream in(kTinyGptq / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config.erase("quantization_config");
  copy_tiny_gptq(dir, config.dump());
  RunResult r = run_qlm("inspect " + quoted(dir.path()));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.out, "quantization: none")) << r.out;
  EXPECT_TRUE(contains(r.out, "[config.missing_quantization]")) << r.out;
  EXPECT_TRUE(contains(r.out, "tensors: 63")) << r.out;  // the rest is still reported
}

TEST(InspectCli, ConflictingSourcesAndBadConfigAreReported) {
  TempDir dir("qlm-inspect");
  copy_tiny_gptq(dir);
  dir.write("quantize_config.json", R"({"bits": 8, "group_size": 32})");
  RunResult r = run_qlm("inspect --json " + quoted(dir.path()));
  EXPECT_EQ(r.status, 1);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(contains(j["errors"].dump(), "config.conflict")) << j["errors"];
  EXPECT_EQ(j["config"]["hidden_size"], 64);

  fs::remove(dir / "quantize_config.json");
  dir.write("config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": "64"})");
  r = run_qlm("inspect --json " + quoted(dir.path()));
  EXPECT_EQ(r.status, 1);
  j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(contains(j["errors"].dump(), "hidden_size: expected integer, found string")) << j["errors"];
  EXPECT_EQ(j["config"]["hidden_size"], "64");  // shown as written
}

TEST(InspectCli, MalformedConfigIsReportedOnce) {
  TempDir dir("qlm-inspect");
  copy_tiny_gptq(dir, "[[[");
  RunResult r = run_qlm("inspect --json " + quoted(dir.path()));
  EXPECT_EQ(r.status, 1);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["errors"].size(), 1u) << j["errors"];
  EXPECT_TRUE(contains(j["errors"][0].get<std::string>(), "[json.parse]")) << j["errors"];
  EXPECT_TRUE(j["config"].is_null());
  EXPECT_EQ(j["tensors"]["count"], 63);
}

TEST(InspectCli, MissingDirectoryFails) {
  RunResult r = run_qlm("inspect /nonexistent/qlm-model-dir");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.out, "errors:")) << r.out;
  EXPECT_NE(run_qlm("inspect").status, 0);  // MODEL_DIR is required
}

}  // namespace
