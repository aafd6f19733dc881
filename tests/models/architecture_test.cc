// Architecture registry and config errors, on edited copies of a fixture.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cuda/device.h"
#include "models/architecture.h"
#include "models/model_fixtures.h"
#include "runtime/model.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;

// A copy of fixture `name` whose config.json is edited by `edit`.
void copy_fixture(const testing::TempDir& dir, const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path src = testing::model_fixture_root() / name;
  for (const auto& entry : fs::directory_iterator(src)) fs::copy_file(entry.path(), dir / entry.path().filename().string());
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  dir.write("config.json", config.dump(2));
}

TEST(Architectures, AllFourRegistered) {
  const std::vector<std::string> names = models::ArchitectureRegistry::instance().names();
  for (const char* arch : {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
    EXPECT_NE(std::find(names.begin(), names.end(), arch), names.end()) << arch;
}

TEST(Architectures, UnknownListsSupported) {
  testing::TempDir dir;
  copy_fixture(dir, "llama-gqa", [](nlohmann::json& c) { c["architectures"] = {"GPTNeoXForCausalLM"}; });
  EXPECT_QLM_ERROR(runtime::Model::load(dir.path()), "model.unknown_architecture",
                   "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen2MoeForCausalLM, "
                   "Qwen3ForCausalLM, Qwen3MoeForCausalLM");
}

TEST(Architectures, ConfigFeaturesResolved) {
  auto qwen2 = runtime::Model::load(testing::model_fixture_root() / "qwen2-bias-tied");
  EXPECT_TRUE(qwen2->config().qkv_bias);
  EXPECT_FALSE(qwen2->config().o_bias);
  EXPECT_TRUE(qwen2->config().tie_word_embeddings);
  auto qwen3 = runtime::Model::load(testing::model_fixture_root() / "qwen3-qknorm");
  EXPECT_TRUE(qwen3->config().qk_norm);
  EXPECT_EQ(qwen3->config().head_dim, 32);
  EXPECT_EQ(qwen3->config().rope.type, ops::RopeType::Linear);
  auto mistral = runtime::Model::load(testing::model_fixture_root() / "mistral-swa");
  EXPECT_EQ(mistral->config().sliding_window, (std::vector<int64_t>{6, 6}));
  auto llama3 = runtime::Model::load(testing::model_fixture_root() / "llama3-rope-bias");
  EXPECT_EQ(llama3->config().rope.type, ops::RopeType::Llama3);
  EXPECT_TRUE(llama3->config().mlp_bias && llama3->config().o_bias);
}

TEST(Architectures, UnsupportedRopeTypeNamesKey) {
  testing::TempDir dir;
  copy_fixture(dir, "llama-gqa", [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  EXPECT_QLM_ERROR(runtime::Model::load(dir.path()), "config.unsupported", "rope_scaling.rope_type = 'yarn'");
}

TEST(Architectures, Llama3RopeNeedsItsFields) {
  testing::TempDir dir;
  copy_fixture(dir, "llama3-rope-bias", [](nlohmann::json& c) { c["rope_scaling"].erase("low_freq_factor"); });
  EXPECT_QLM_ERROR(runtime::Model::load(dir.path()), "config.missing_key", "low_freq_factor");
}

TEST(ModelLoad, CudaWithoutAGpuIsAClearError) {
  if (!cuda_devices().empty()) GTEST_SKIP() << "a GPU is visible (tests/cuda covers loading there)";
  EXPECT_QLM_ERROR(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", {.device = Device::cuda(0)}),
                   "device.unavailable", "--device cpu");
}

TEST(ModelLoad, CpuActivationsAreF32) {
  EXPECT_QLM_ERROR(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", {.act_dtype = DType::BF16}),
                   "model.act_dtype", "activations on the CPU are F32");
  EXPECT_EQ(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", {.act_dtype = DType::F32})->act_dtype(),
            DType::F32);
}

TEST(ModelLoad, TpMustDivideHeads) {
  EXPECT_QLM_ERROR(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", {.tp = 3}), "model.tp",
                   "num_attention_heads = 4");
}

TEST(ModelLoad, PlanNamesMethodsAndKernels) {
  auto gptq = runtime::Model::load(testing::model_fixture_root() / "llama-gqa-gptq");
  const std::string summary = gptq->plan().summary();
  EXPECT_NE(summary.find("gptq uint4b8 g32 → cpu_"), std::string::npos) << summary;
  EXPECT_NE(summary.find("×9"), std::string::npos) << summary;  // 2 layers × 4 projections + quantized lm_head
  auto dense = runtime::Model::load(testing::model_fixture_root() / "llama-gqa");
  EXPECT_NE(dense->plan().summary().find("unquantized F32 → "), std::string::npos) << dense->plan().summary();
  EXPECT_GT(gptq->linear_weight_bytes(), 0u);
  EXPECT_LT(gptq->linear_weight_bytes(), dense->linear_weight_bytes());
}

}  // namespace
}  // namespace qlm
