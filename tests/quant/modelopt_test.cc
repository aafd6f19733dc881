// ModelOpt FP8 (quant/modelopt): synthetic checkpoints written here from the float llama-gqa
// fixture — per-tensor fp8 weights with `weight_scale`, static `input_scale`, wildcard
// `exclude_modules` / `ignore`, kv_cache_quant_algo FP8 with k/v scales — in both config
// spellings. The same tensors under `quant_method: fp8` (static) must give identical logits, since
// both formats are the shared W8A8 method on the same kernels; and every bad config has its error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "io/safetensors.h"
#include "models/model_fixtures.h"
#include "quant/kv_cache/kv_cache_method.h"
#include "quant/modelopt/modelopt_config.h"
#include "quant/w8a8_test_util.h"
#include "runtime/model.h"
#include "runtime/model_plan.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFloat = fs::path(QLM_TEST_DATA_DIR) / "models" / "llama-gqa";
constexpr float kInputScale = 0.05f;  // static activation scale: |x| up to 22 is representable

struct Options {
  bool kv_scales = false;
  float k_scale = 0.5f;
  std::function<bool(const std::string&)> keep_float = [](const std::string& m) { return m == "lm_head"; };
};

// llama-gqa with every linear weight (but the kept-float modules) as per-tensor fp8.
void write_fp8_checkpoint(const fs::path& dir, const Options& o) {
  const io::SafetensorsFile src = io::SafetensorsFile::open(kFloat / "model.safetensors");
  std::vector<std::pair<std::string, Tensor>> out;
  for (const io::TensorInfo& info : src.tensors()) {
    const std::string& name = info.name;
    Tensor t = src.tensor(name);
    const std::string module = name.substr(0, name.rfind('.'));
    if (!name.ends_with("_proj.weight") || o.keep_float(module)) {
      out.emplace_back(name, t);
      continue;
    }
    const int64_t N = t.size(0), K = t.size(1);
    W8Part p = fp8_tensor_part(t.to_float_vector(), N, K);
    for (auto& [suffix, tensor] : p.tensors) out.emplace_back(module + "." + suffix, tensor);
    out.emplace_back(module + ".input_scale", Tensor::from_vector(std::vector<float>{kInputScale}, Shape{}));
  }
  if (o.kv_scales)
    for (int layer = 0; layer < 2; ++layer) {
      const std::string attn = fmt::format("model.layers.{}.self_attn.", layer);
      out.emplace_back(attn + "k_proj.k_scale", Tensor::from_vector(std::vector<float>{o.k_scale}, Shape{}));
      out.emplace_back(attn + "v_proj.v_scale", Tensor::from_vector(std::vector<float>{0.25f}, Shape{}));
    }
  io::write_safetensors(dir / "model.safetensors", out);
}

json float_config() {
  std::ifstream in(kFloat / "config.json");
  return json::parse(in);
}

void write_json(const fs::path& file, const json& j) { std::ofstream(file) << j.dump(2); }

// A ModelOpt directory in the legacy spelling (hf_quant_config.json beside a plain config.json).
void write_legacy(const TempDir& dir, const json& quantization, const Options& o = {}) {
  write_fp8_checkpoint(dir.path(), o);
  write_json(dir / "config.json", float_config());
  write_json(dir / "hf_quant_config.json",
             {{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}}, {"quantization", quantization}});
}

// The same tensors under config.json's quantization_config.
void write_with_quantization_config(const TempDir& dir, const json& qc, const Options& o = {}) {
  write_fp8_checkpoint(dir.path(), o);
  json config = float_config();
  config["quantization_config"] = qc;
  write_json(dir / "config.json", config);
}

std::vector<int32_t> tokens() { return {1, 17, 300, 5, 911, 42, 42, 7}; }

Tensor logits_of(const fs::path& dir) { return runtime::Model::load(dir)->forward(tokens()); }

std::unique_ptr<QuantizationConfig> config_from(const json& qc) {
  auto doc = std::make_shared<const json>(qc);
  return resolve_quantization_config(io::JsonView(doc, "config.json", "quantization_config"), std::nullopt);
}

TEST(ModelOpt, LegacyFileLoadsAndMatchesTheFp8FormatExactly) {
  TempDir modelopt, fp8;
  write_legacy(modelopt, {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}},
               {.kv_scales = true});
  write_with_quantization_config(fp8, {{"quant_method", "fp8"}, {"activation_scheme", "static"}});

  auto model = runtime::Model::load(modelopt.path());
  EXPECT_EQ(model->plan().quantization, "modelopt FP8 per-tensor static kv_cache=FP8 exclude_modules=1");
  EXPECT_EQ(model->plan().layers.front().format, "modelopt");
  EXPECT_EQ(model->plan().layers.back().method, "unquantized F32");  // lm_head
  const Tensor got = model->forward(tokens());
  const Tensor want = logits_of(fp8.path());
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.to_float_vector(), want.to_float_vector());

  // And close to the float model it was quantized from (fp8 weights and activations).
  const Tensor ref = logits_of(kFloat);
  EXPECT_LT(normwise_relative_error(got, ref), 0.1);
}

TEST(ModelOpt, ConfigJsonSpellingWithWildcardIgnore) {
  TempDir dir;
  Options o;
  o.keep_float = [](const std::string& m) { return m == "lm_head" || m.starts_with("model.layers.1.mlp."); };
  write_with_quantization_config(
      dir, {{"quant_method", "modelopt"}, {"quant_algo", "fp8"}, {"ignore", {"lm_head", "model.layers.1.mlp.*"}}}, o);
  const runtime::ModelPlan plan = runtime::plan_model(dir.path(), {});
  for (const runtime::LayerPlan& l : plan.ranks[0].layers) {
    const bool floating = l.layer == "lm_head" || l.layer.starts_with("model.layers.1.mlp.");
    EXPECT_EQ(l.format, floating ? "unquantized" : "modelopt") << l.layer;
    if (!floating) {
      EXPECT_EQ(l.method, "modelopt fp8_e4m3 w=tensor act=static_tensor") << l.layer;
    }
  }
  EXPECT_EQ(logits_of(dir.path()).size(0), 8);
}

TEST(ModelOpt, WildcardsMatchTheWholeName) {
  PatternList p({"*.mlp.*", "lm_head", "model.layers.?.self_attn.o_proj"}, PatternSpelling::Wildcard, "ignore");
  EXPECT_TRUE(p.matches("model.layers.3.mlp.down_proj"));
  EXPECT_TRUE(p.matches("lm_head"));
  EXPECT_TRUE(p.matches("model.layers.7.self_attn.o_proj"));
  EXPECT_FALSE(p.matches("model.layers.12.self_attn.o_proj"));
  EXPECT_FALSE(p.matches("model.lm_head_extra"));  // no substring matching
  EXPECT_FALSE(p.matches("model.layers.0.self_attn.q_proj"));
}

TEST(ModelOpt, UnsupportedAlgorithmsNameTheValueAndWhatIsSupported) {
  for (const char* algo : {"NVFP4", "FP8_PB_WO", "W4A8_AWQ", "FP8_PER_CHANNEL_PER_TOKEN"}) {
    SCOPED_TRACE(algo);
    EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}, {"quant_algo", algo}}), "config.unsupported_scheme",
                     fmt::format("quantization_config.quant_algo = \"{}\" is not supported yet; supported: FP8", algo));
  }
  // config.json's modelopt_fp4 spelling reaches the same error instead of "unknown method".
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt_fp4"}, {"quant_algo", "NVFP4"}}),
                   "config.unsupported_scheme", "\"NVFP4\" is not supported yet");
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", "NVFP4"}}),
                   "config.unsupported_scheme", "kv_cache_quant_algo = \"NVFP4\" is not supported yet");
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"},
                                {"quant_algo", "FP8"},
                                {"kv_cache_scheme", {{"type", "int"}, {"num_bits", 8}}}}),
                   "config.unsupported_scheme", "a KV cache of type int with 8 bits is not supported yet");
}

TEST(ModelOpt, MalformedConfigs) {
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}}), "config.missing_key", "has no quant_algo");
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}, {"quant_algo", 8}}), "config.type", "quant_algo");
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"exclude_modules", "lm_head"}}),
                   "config.type", "exclude_modules");
  EXPECT_QLM_ERROR(config_from({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", 1}}),
                   "config.type", "kv_cache_quant_algo");
  // The legacy file nests the fields: the message names the nested key.
  TempDir dir;
  write_legacy(dir, {{"kv_cache_quant_algo", nullptr}});
  EXPECT_QLM_ERROR(runtime::Model::load(dir.path()), "config.missing_key", "quantization.quant_algo");
}

TEST(ModelOpt, KvCacheConfigAndScales) {
  auto config = config_from({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}});
  LayerInfo attn;
  attn.kind = LayerInfo::Kind::Attention;
  attn.prefix = "model.layers.0.self_attn";
  EXPECT_NE(config->get_kv_cache_method(attn, {}), nullptr);
  EXPECT_QLM_ERROR(check_kv_cache_dtype(KVCacheDType::Fp8E5M2, config.get()), "config.kv_cache_dtype", "modelopt");
  auto no_kv = config_from({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", nullptr}});
  EXPECT_EQ(no_kv->get_kv_cache_method(attn, {}), nullptr);

  // A checkpoint's k/v scales are consumed and validated; without a KV algorithm they are not ours.
  TempDir bad, stray;
  write_legacy(bad, {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}},
               {.kv_scales = true, .k_scale = -1.0f});
  EXPECT_QLM_ERROR(runtime::Model::load(bad.path()), "kv_cache.scale", "model.layers.0.self_attn");
  write_legacy(stray, {{"quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}}, {.kv_scales = true});
  EXPECT_QLM_ERROR(runtime::Model::load(stray.path()), "loader.unconsumed", "k_proj.k_scale");
}

TEST(ModelOpt, GpuPlanNeedsFp8TensorCores) {
  TempDir dir;
  write_legacy(dir, {{"quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}});
  runtime::ModelOptions options;
  options.device = Device::cuda(0);
  EXPECT_QLM_ERROR(runtime::plan_model(dir.path(), options, 80), "plan.capability",
                   "quantization 'modelopt' needs CUDA compute capability 89 or newer; --capability 80 was given");
}

TEST(ModelOpt, FusedLayersMustBeExcludedWhole) {
  TempDir dir;
  write_legacy(dir, {{"quant_algo", "FP8"}, {"exclude_modules", {"lm_head", "*.k_proj"}}});
  EXPECT_QLM_ERROR(runtime::plan_model(dir.path(), {}), "config.fused_mismatch", "unquantized (exclude_modules)");
}

}  // namespace
}  // namespace qlm::testing
