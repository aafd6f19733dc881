// `qlm inspect --plan`: the built `qlm` binary on models/tiny-gptq, and plan_model directly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "runtime/model_plan.h"
#include "support/expect_error.h"
#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

using RunResult = testing::QlmRun;
using testing::run_qlm;

namespace fs = std::filesystem;

const fs::path kQlm = fs::path(QLM_BINARY_DIR) / "qlm";
const fs::path kTinyGptq = fs::path(QLM_SOURCE_DIR) / "models" / "tiny-gptq";

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

std::string plan_args(const std::string& extra) { return "inspect '" + kTinyGptq.string() + "' --plan " + extra; }

TEST(InspectPlanCli, TextListsEveryLayerWithMethodKernelAndRejections) {
  ASSERT_TRUE(fs::exists(kQlm)) << kQlm;
  const RunResult r = run_qlm(plan_args("--linear-backend cpu_ref"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* piece :
       {"plan: LlamaForCausalLM on cpu", "quantization: gptq 4-bit g32 sym", "model.layers.0.self_attn.qkv_proj",
        "model.layers.1.mlp.down_proj", "lm_head", "gptq uint4b8 g32  → cpu_ref", "unquantized F16  → cpu_ref",
        "rejected cpu_fast_dense: excluded by --linear-backend=cpu_ref", "gptq uint4b8 g32 → cpu_ref ×8",
        "9 linear layers per rank: 8 quantized, 1 unquantized"})
    EXPECT_TRUE(contains(r.out, piece)) << "missing '" << piece << "' in:\n" << r.out;
}

TEST(InspectPlanCli, JsonHasTheFieldsAndTheBackendChangesTheKernel) {
  const RunResult automatic = run_qlm(plan_args("--json"));
  const RunResult ref = run_qlm(plan_args("--json --linear-backend cpu_ref"));
  ASSERT_EQ(automatic.status, 0) << automatic.err;
  ASSERT_EQ(ref.status, 0) << ref.err;
  const nlohmann::json a = nlohmann::json::parse(automatic.out), b = nlohmann::json::parse(ref.out);
  for (const char* key : {"model_dir", "architecture", "device", "capability", "act_dtype", "tp", "linear_backend",
                          "quantization", "ranks", "notes", "totals"})
    EXPECT_TRUE(a.contains(key)) << key;
  EXPECT_EQ(a["device"], "cpu");
  EXPECT_EQ(a["tp"], 1);
  ASSERT_EQ(a["ranks"].size(), 1u);
  const nlohmann::json& layers = a["ranks"][0]["layers"];
  ASSERT_EQ(layers.size(), 9u);
  EXPECT_EQ(layers.back()["layer"], "lm_head");
  EXPECT_EQ(layers.back()["format"], "unquantized");
  const nlohmann::json& qkv = layers[3];
  EXPECT_EQ(qkv["layer"], "model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(qkv["format"], "gptq");
  EXPECT_EQ(qkv["method"], "gptq uint4b8 g32");
  EXPECT_EQ(qkv["K_p"], 64);
  EXPECT_EQ(qkv["N_p"], 128);  // 4 q heads + 2 k + 2 v heads of 16
  EXPECT_TRUE(qkv["rejected"].is_array());
  EXPECT_EQ(a["totals"]["quantized"], 8);

  const nlohmann::json& qkv_ref = b["ranks"][0]["layers"][3];
  EXPECT_EQ(qkv_ref["kernel"], "cpu_ref");
  EXPECT_EQ(b["linear_backend"], "cpu_ref");
  // cpu_ref comes last in priority, so every faster kernel is listed as excluded by the filter.
  ASSERT_FALSE(qkv_ref["rejected"].empty());
  for (const auto& rej : qkv_ref["rejected"]) EXPECT_EQ(rej["reason"], "excluded by --linear-backend=cpu_ref");
  if (qkv["kernel"] != "cpu_ref") {
    EXPECT_NE(qkv["kernel"], qkv_ref["kernel"]);
  }
}

TEST(InspectPlanCli, EveryRankIsPlanned) {
  const RunResult r = run_qlm(plan_args("--json --tp 2"));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][1]["rank"], 1);
  EXPECT_EQ(j["ranks"][1]["layers"][0]["layer"], "model.layers.0.mlp.down_proj");
  EXPECT_EQ(j["ranks"][1]["layers"][0]["K_p"], 64);  // row-parallel: intermediate 128 split in 2
  const RunResult text = run_qlm(plan_args("--tp 2"));
  EXPECT_TRUE(contains(text.out, "rank 1: same methods and kernels as rank 0")) << text.out;
}

// MoE models: every fused-MoE layer of every rank with its MoE method and MoE kernel, besides the
// expert projections' own rows; on CUDA the device's MoE kernel.
TEST(InspectPlanCli, MoELayersShowTheirMoEKernel) {
  const fs::path moe = fs::path(QLM_SOURCE_DIR) / "tests" / "data" / "models" / "mixtral-moe-gptq";
  const RunResult r = run_qlm("inspect '" + moe.string() + "' --plan --json --tp 2");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& rank : j["ranks"]) {
    const nlohmann::json& layers = rank["moe"];
    ASSERT_EQ(layers.size(), 2u);  // two decoder layers, both MoE
    EXPECT_EQ(layers[0]["layer"], "model.layers.0.block_sparse_moe");
    EXPECT_EQ(layers[1]["layer"], "model.layers.1.block_sparse_moe");
    EXPECT_EQ(layers[0]["kernel"], "cpu_grouped");
    EXPECT_EQ(layers[0]["experts"], 4);
    EXPECT_EQ(layers[0]["top_k"], 2);
    EXPECT_EQ(layers[0]["hidden"], 64);
    EXPECT_EQ(layers[0]["intermediate_p"], 32);  // intermediate 64 split over 2 ranks
    EXPECT_TRUE(contains(layers[0]["method"].get<std::string>(), "gptq uint4b8 g32")) << layers[0]["method"];
    EXPECT_FALSE(contains(layers[0]["method"].get<std::string>(), "[cpu_grouped]")) << layers[0]["method"];
  }
  const RunResult text = run_qlm("inspect '" + moe.string() + "' --plan");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "rank 0 mixture-of-experts:")) << text.out;
  EXPECT_TRUE(contains(text.out, "model.layers.1.block_sparse_moe  [4 experts, top-2, 64 → 64]")) << text.out;
  EXPECT_TRUE(contains(text.out, "→ cpu_grouped")) << text.out;
  const RunResult cuda = run_qlm("inspect '" + moe.string() + "' --plan --json --device cuda --capability 90");
  if (cuda.status == 0)
    EXPECT_EQ(nlohmann::json::parse(cuda.out)["ranks"][0]["moe"][0]["kernel"], "cuda_grouped") << cuda.out;
  else
    EXPECT_TRUE(contains(cuda.err, "[plan.no_device_kernels]")) << cuda.err;  // a build without CUDA kernels
  // Dense models list none.
  const RunResult dense = run_qlm(plan_args("--json"));
  ASSERT_EQ(dense.status, 0) << dense.err;
  EXPECT_TRUE(nlohmann::json::parse(dense.out)["ranks"][0]["moe"].empty());
}

TEST(InspectPlanCli, BadCombinationsFailWithTheirReasons) {
  // A scaled-mm kernel name matches no mixed-precision kernel.
  RunResult r = run_qlm(plan_args("--linear-backend cpu_fast_fp8"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "[kernel.no_backend]")) << r.err;
  EXPECT_TRUE(contains(r.err, "cpu_fast_fp8")) << r.err;
  r = run_qlm(plan_args("--capability 90"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "[cli.usage]")) << r.err;
  r = run_qlm(plan_args("--verify-data"));
  EXPECT_TRUE(contains(r.err, "[cli.usage]")) << r.err;
  r = run_qlm(plan_args("--dtype bf16"));  // the CPU runs F32 activations only
  EXPECT_TRUE(contains(r.err, "[model.act_dtype]")) << r.err;
  r = run_qlm(plan_args("--tp 3"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, "tensor-parallel")) << r.err;
}

TEST(InspectPlanCli, CudaPlanWithoutAGpu) {
  const RunResult r = run_qlm(plan_args("--device cuda --capability 90 --dtype f16 --json"));
  if (r.status != 0) {
    // A build without cuda_* kernels says so instead of listing empty reasons.
    EXPECT_TRUE(contains(r.err, "[plan.no_device_kernels]")) << r.err;
    EXPECT_TRUE(contains(r.err, "cuda_*")) << r.err;
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"], "cuda:0");
  EXPECT_EQ(j["capability"], 90);
  EXPECT_EQ(j["act_dtype"], "F16");
  int with_paths = 0;
  for (const auto& layer : j["ranks"][0]["layers"]) {
    EXPECT_EQ(layer["kernel"].get<std::string>().rfind("cuda", 0), 0u);
    // cuda_wna16_fast says which path runs at which token count, from one token to its cuBLAS bound.
    if (layer["kernel"] == "cuda_wna16_fast") {
      ASSERT_TRUE(layer.contains("paths")) << layer.dump();
      const std::string paths = layer["paths"];
      EXPECT_EQ(paths.rfind("M 1", 0), 0u) << paths;
      EXPECT_TRUE(paths.ends_with(" dequant+cuBLAS")) << paths;
      ++with_paths;
    }
  }
  if (with_paths > 0) {
    const RunResult text = run_qlm(plan_args("--device cuda --capability 90 --dtype f16"));
    EXPECT_TRUE(contains(text.out, "\n      paths: M 1")) << text.out;
  }
}

// The experts of a GPTQ MoE model on CUDA run in the MoE kernel's own layout: their plan lines name it, and neither
// they nor the MoE line name a linear kernel or its per-token paths (which do not apply to them).
TEST(InspectPlanCli, CudaMoeExpertsNameTheMoeKernel) {
  const fs::path model = fs::path(QLM_SOURCE_DIR) / "tests" / "data" / "models" / "qwen3-moe-gptq";
  const RunResult r = run_qlm("inspect '" + model.string() + "' --plan --device cuda --capability 90 --json");
  if (r.status != 0) {
    EXPECT_TRUE(contains(r.err, "[plan.no_device_kernels]")) << r.err;  // a build without cuda_* kernels
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(r.out);
  int experts = 0;
  for (const auto& layer : j["ranks"][0]["layers"]) {
    if (!contains(layer["layer"].get<std::string>(), ".experts.")) continue;
    ++experts;
    EXPECT_EQ(layer["kernel"], "cuda_grouped") << layer.dump();
    EXPECT_EQ(layer.value("paths", ""), "with the layer's other experts, grouped by cuda_grouped") << layer.dump();
  }
  EXPECT_GT(experts, 0) << r.out;
  ASSERT_FALSE(j["ranks"][0]["moe"].empty()) << r.out;
  EXPECT_EQ(j["ranks"][0]["moe"][0]["kernel"], "cuda_grouped");
  // ... and so does the MoE line: no linear kernel in the experts' schemes.
  const std::string method = j["ranks"][0]["moe"][0]["method"];
  EXPECT_FALSE(contains(method, "cuda_wna16")) << method;
  EXPECT_TRUE(contains(method, "w13 [gptq uint4b8 g")) << method;
}

TEST(ModelPlan, NeedsNoWeightValues) {
  // Every data byte of the checkpoint set to 0xFF (NaN scales): loading rejects it, the plan only
  // reads the headers and declares the layers.
  testing::TempDir dir;
  fs::copy_file(kTinyGptq / "config.json", dir / "config.json");
  std::ifstream in(kTinyGptq / "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  std::fill(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header), bytes.end(), '\xFF');
  dir.write("model.safetensors", bytes);
  EXPECT_THROW(runtime::Model::load(dir.path(), {}), Error);
  const runtime::ModelPlan plan = runtime::plan_model(dir.path(), {});
  ASSERT_EQ(plan.ranks.size(), 1u);
  EXPECT_EQ(plan.ranks[0].layers.size(), 9u);
  EXPECT_EQ(plan.ranks[0].summary().find("gptq uint4b8 g32 → "), 0u) << plan.ranks[0].summary();
}

}  // namespace
}  // namespace qlm
