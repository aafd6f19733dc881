// The loader end to end (safetensors on disk -> ModuleSet) and its completeness checks
// (RELIABILITY.md T7, B.5 item 25): unconsumed tensors, unwritten parameters, zero biases.
#include "loader/loader.h"

#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "support/test_methods.h"
#include "support/tiny_llama.h"

namespace qlm {
namespace {

using testing::NamedTensors;
using testing::TinyLlamaSizes;

const TinyLlamaSizes kSizes{};

NamedTensors without(NamedTensors t, const std::string& name) {
  std::erase_if(t, [&](const auto& p) { return p.first == name; });
  return t;
}

ModuleSet tiny_block(const QuantizationConfig* config = nullptr, DType dtype = DType::F32) {
  ModuleSet m;
  testing::add_tiny_block(m, kSizes, config, QuantContext{}, TpContext{}, dtype);
  return m;
}

TEST(Loader, LoadsASafetensorsCheckpointWithProgress) {
  testing::TempDir dir;
  NamedTensors tensors = testing::tiny_block_tensors(kSizes, DType::BF16, 1);
  tensors.emplace_back("model.norm.weight", Tensor::zeros({kSizes.hidden}, DType::BF16));
  io::write_safetensors(dir / "model.safetensors", tensors);
  io::Checkpoint ckpt = io::Checkpoint::open(dir.path());

  ModuleSet modules = tiny_block(nullptr, DType::BF16);
  modules.add_dense("model.norm.weight", {kSizes.hidden}, DType::BF16);
  std::vector<LoadProgress> seen;
  LoadReport report = load_checkpoint(ckpt, modules, [&](const LoadProgress& p) { seen.push_back(p); });
  EXPECT_EQ(report.tensors_total, tensors.size());
  EXPECT_EQ(report.tensors_loaded, tensors.size() - 1);
  EXPECT_EQ(report.tensors_ignored, 1u);
  EXPECT_EQ(report.layers_finalized, 4u);
  EXPECT_EQ(report.dense_tensors, 1u);
  ASSERT_EQ(seen.size(), tensors.size());
  EXPECT_EQ(seen.back().tensors_done, tensors.size());
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_GT(report.bytes_loaded, 0u);
  EXPECT_NE(report.summary().find("4 layers"), std::string::npos) << report.summary();
  for (const auto& [prefix, layer] : modules.linears()) EXPECT_TRUE(layer->finalized()) << prefix;
  EXPECT_EQ(modules.dense("model.norm.weight").dtype(), DType::BF16);
}

TEST(Loader, UnconsumedTensorsAreListedTogether) {
  NamedTensors tensors = testing::tiny_block_tensors(kSizes, DType::F32, 1);
  tensors.emplace_back("lm_head.weight_packed", Tensor::zeros({4, 4}, DType::I32));
  tensors.emplace_back("model.layers.0.mlp.down_proj.weight_scale", Tensor::zeros({4}, DType::F32));
  ModuleSet modules = tiny_block();
  EXPECT_QLM_ERROR(load_tensors(tensors, modules), "loader.unconsumed", "lm_head.weight_packed has no consumer");
  ModuleSet again = tiny_block();
  EXPECT_QLM_ERROR(load_tensors(tensors, again), "loader.unconsumed",
                   "model.layers.0.mlp.down_proj.weight_scale has no consumer (layer model.layers.0.mlp.down_proj "
                   "[unquantized] has: weight)");
  ModuleSet ignoring = tiny_block();
  ignoring.ignore("lm_head.*");
  ignoring.ignore("*.weight_scale");
  EXPECT_EQ(load_tensors(tensors, ignoring).tensors_ignored, 3u);
}

TEST(Loader, UnwrittenParametersOfAllLayersAreListedTogether) {
  NamedTensors tensors = testing::tiny_block_tensors(kSizes, DType::F32, 1);
  tensors = without(without(tensors, "model.layers.0.self_attn.v_proj.weight"), "model.layers.0.mlp.down_proj.weight");
  ModuleSet modules = tiny_block();
  modules.add_dense("model.norm.weight", {kSizes.hidden}, DType::F32);
  modules.add_dense("lm_head.weight", {8, kSizes.hidden}, DType::F32, /*optional=*/true);
  try {
    load_tensors(tensors, modules);
    FAIL() << "expected loader.incomplete";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "loader.incomplete");
    const std::string what = e.what();
    EXPECT_NE(what.find("3 parameter(s) not fully written"), std::string::npos) << what;
    EXPECT_NE(what.find("model.layers.0.self_attn.qkv_proj (unquantized): 'weight' F32[96, 64]: unwritten [80, 96)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("model.layers.0.mlp.down_proj (unquantized): 'weight' F32[64, 96]: nothing written"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("'model.norm.weight'"), std::string::npos) << what;
    EXPECT_EQ(what.find("lm_head"), std::string::npos) << what;
  }
}

// RELIABILITY.md B.5 item 25: a layer the config declares quantized is stored dense.
TEST(Loader, QuantizedLayerStoredDenseIsDetected) {
  testing::DeclareOnlyConfig gptq([](LinearLayer& l, int64_t kp, const std::vector<int64_t>& parts, int64_t, int64_t,
                                     DType) {
    int64_t np = 0;
    for (int64_t p : parts) np += p;
    testing::declare(l, "qweight", ParamKind::PackedWeight, {kp / 8, np}, DType::I32, 0, 1, 0, {8, 1});
    testing::declare(l, "scales", ParamKind::GroupScale, {kp / 32, np}, DType::F16, 0, 1);
  });
  ModuleSet modules;
  modules.add_linear({.prefix = "model.layers.0.mlp.down_proj", .kind = LinearKind::Row, .input_size = 64,
                      .output_size = 32},
                     &gptq, QuantContext{}, TpContext{});
  NamedTensors dense{{"model.layers.0.mlp.down_proj.weight", Tensor::zeros({32, 64}, DType::BF16)}};
  EXPECT_QLM_ERROR(load_tensors(dense, modules), "loader.unconsumed",
                   "and 2 parameter(s) stay unwritten:\n  model.layers.0.mlp.down_proj (declare_only): 'qweight'");
  EXPECT_QLM_ERROR(modules.linear("model.layers.0.mlp.down_proj").finalize(), "loader.incomplete",
                   "'scales' F16[2, 32]: nothing written");
}

TEST(Loader, ZeroBiasesOfBiaslessLayersAreSkippedOthersRejected) {
  NamedTensors tensors = testing::tiny_block_tensors(kSizes, DType::F32, 1);
  tensors.emplace_back("model.layers.0.self_attn.o_proj.bias", Tensor::zeros({kSizes.hidden}, DType::F16));
  tensors.emplace_back("model.layers.0.self_attn.k_proj.bias", Tensor::zeros({16}, DType::F16));
  ModuleSet modules = tiny_block();
  LoadReport report = load_tensors(tensors, modules);
  EXPECT_EQ(report.zero_biases_skipped, 2u);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("2 all-zero bias"), std::string::npos);

  tensors.back().second = Tensor::from_vector<float>(std::vector<float>(16, 0.5f), {16});
  ModuleSet again = tiny_block();
  EXPECT_QLM_ERROR(load_tensors(tensors, again), "loader.unexpected_bias",
                   "layer 'model.layers.0.self_attn.qkv_proj': tensor 'model.layers.0.self_attn.k_proj.bias'");
}

TEST(Loader, ShapeAndDtypeErrorsNameFileLayerAndTensor) {
  testing::TempDir dir;
  NamedTensors tensors = testing::tiny_block_tensors(kSizes, DType::F32, 1);
  for (auto& [name, t] : tensors)
    if (name == "model.layers.0.mlp.up_proj.weight") t = Tensor::zeros({90, kSizes.hidden}, DType::F32);
  io::write_safetensors(dir / "model.safetensors", tensors);
  io::Checkpoint ckpt = io::Checkpoint::open(dir.path());
  ModuleSet modules = tiny_block();
  EXPECT_QLM_ERROR(load_checkpoint(ckpt, modules), "loader.shape",
                   "model.safetensors': layer 'model.layers.0.mlp.gate_up_proj': tensor "
                   "'model.layers.0.mlp.up_proj.weight'");
  ModuleSet bf16 = tiny_block(nullptr, DType::BF16);
  EXPECT_QLM_ERROR(load_tensors(testing::tiny_block_tensors(kSizes, DType::F32, 1), bf16), "loader.dtype",
                   "has dtype BF16 but checkpoint tensor");
  ModuleSet dense;
  dense.add_dense("model.embed_tokens.weight", {10, 4}, DType::F32);
  EXPECT_QLM_ERROR(load_tensors({{"model.embed_tokens.weight", Tensor::zeros({11, 4}, DType::F32)}}, dense),
                   "loader.shape", "expects shape [10, 4] but checkpoint tensor 'model.embed_tokens.weight' is F32[11, 4]");
}

TEST(Loader, StackedMappingOnlyAppliesWhenTheFusedLayerExists) {
  ModuleSet modules;
  modules.add_stacked(llama_stacked_params());
  modules.add_linear({.prefix = "vision.q_proj", .kind = LinearKind::Replicated, .input_size = 4, .output_size = 4},
                     nullptr, QuantContext{}, TpContext{});
  auto target = modules.resolve("vision.q_proj.weight");
  ASSERT_TRUE(target.has_value());
  EXPECT_EQ(target->layer->prefix(), "vision.q_proj");
  EXPECT_EQ(target->shard.kind, ShardId::Kind::Whole);
  EXPECT_FALSE(modules.resolve("vision.k_proj.weight").has_value());
  EXPECT_FALSE(modules.resolve("weight").has_value());
}

}  // namespace
}  // namespace qlm
