// The W8A8 checkpoints under tests/data/w8a8/ were made by the real tools (llm-compressor oneshot +
// compressed-tensors save_compressed; scripts/make_w8a8_fixtures.py; README.md there says what each
// reference is and why the tolerances are what they are). qlm must load each and match
//  - the serving-convention reference (the same codes and scales with vLLM's conventions, computed
//    independently in float32) and
//  - the tool's own CPU logits
// with argmax identical at every position and normwise relative error within the fixture's
// tolerances; and `qlm inspect` / `--plan` must describe each scheme.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "models/model_fixtures.h"
#include "runtime/model.h"
#include "runtime/model_plan.h"
#include "runtime/sampling.h"
#include "support/temp_dir.h"
#include "support/run_qlm.h"

namespace qlm::testing {
namespace {

const fs::path kRoot = fs::path(QLM_TEST_DATA_DIR) / "w8a8";
const fs::path kQlm = fs::path(QLM_BINARY_DIR) / "qlm";

struct Fixture {
  std::string name;
  // What `qlm inspect --plan` must say of every quantized layer, and of the format.
  std::string method;
  std::string quantization;
};

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> all = {
      {"fp8-dynamic", "compressed-tensors fp8_e4m3 w=channel act=dynamic_token", "float-quantized fp8_e4m3 w=channel"},
      {"fp8-static", "compressed-tensors fp8_e4m3 w=tensor act=static_tensor", "float-quantized fp8_e4m3 w=tensor"},
      {"int8-dynamic", "compressed-tensors int8 w=channel act=dynamic_token", "int-quantized int8 w=channel"},
      {"fp8-block", "compressed-tensors fp8_e4m3 w=block(128x128) act=dynamic_token_group(128)",
       "float-quantized fp8_e4m3 w=block(128x128)"},
  };
  return all;
}

struct Reference {
  std::vector<int32_t> tokens;
  Tensor logits, serving;
  double tolerance = 0, serving_tolerance = 0;
};

Reference load_reference(const fs::path& dir) {
  std::ifstream in(dir / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  Reference r;
  r.tokens = expected.at("tokens").get<std::vector<int32_t>>();
  r.tolerance = expected.at("tolerance").at("normwise_relative").get<double>();
  r.serving_tolerance = expected.at("tolerance").at("serving_normwise_relative").get<double>();
  const io::SafetensorsFile file = io::SafetensorsFile::open(dir / "reference.safetensors");
  r.logits = file.tensor("logits").to(DType::F32);
  r.serving = file.tensor("serving_logits").to(DType::F32);
  return r;
}

// qlm's stdout and stderr together.
std::string run_qlm(const std::string& args, int& status) {
  const testing::QlmRun r = testing::run_qlm(args);
  status = r.status;
  return r.out + r.err;
}

class W8A8FixtureTest : public ::testing::TestWithParam<Fixture> {};

std::string test_name(const ::testing::TestParamInfo<Fixture>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

void expect_argmax_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  const int64_t T = want.size(0), V = want.size(1);
  for (int64_t t = 0; t < T; ++t)
    EXPECT_EQ(runtime::argmax({got.data<float>() + t * V, static_cast<size_t>(V)}),
              runtime::argmax({want.data<float>() + t * V, static_cast<size_t>(V)}))
        << what << " position " << t;
}

TEST_P(W8A8FixtureTest, LogitsMatchTheToolsReference) {
  const fs::path dir = kRoot / GetParam().name;
  const Reference ref = load_reference(dir);
  ASSERT_LE(ref.tolerance, 0.1) << "a tolerance this loose would hide a wrong scale";
  ASSERT_LE(ref.serving_tolerance, 1e-2);
  for (const std::string backend : {"auto", "cpu_ref"}) {
    SCOPED_TRACE("--linear-backend " + backend);
    runtime::ModelOptions options;
    options.kernels.linear_backend = backend;
    auto model = runtime::Model::load(dir, options);
    const Tensor logits = model->forward(ref.tokens);
    ASSERT_EQ(logits.shape(), ref.logits.shape());
    EXPECT_LE(normwise_relative_error(logits, ref.serving), ref.serving_tolerance) << "vs serving convention";
    expect_argmax_equal(logits, ref.serving, GetParam().name + " vs serving convention");
    EXPECT_LE(normwise_relative_error(logits, ref.logits), ref.tolerance) << "vs the tool";
    expect_argmax_equal(logits, ref.logits, GetParam().name + " vs the tool");
  }
}

TEST_P(W8A8FixtureTest, InspectDescribesTheScheme) {
  const fs::path dir = kRoot / GetParam().name;
  int status = -1;
  const std::string text = run_qlm("inspect '" + dir.string() + "'", status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("quantization: compressed-tensors"), std::string::npos) << text;

  const runtime::ModelPlan plan = runtime::plan_model(dir, {});
  EXPECT_NE(plan.quantization.find(GetParam().quantization), std::string::npos) << plan.quantization;
  for (const runtime::LayerPlan& l : plan.ranks[0].layers) {
    if (l.layer == "lm_head") {
      EXPECT_EQ(l.format, "unquantized");  // llm-compressor's ignore=["lm_head"]
      continue;
    }
    EXPECT_EQ(l.method, GetParam().method) << l.layer;
    EXPECT_EQ(l.kernel.rfind("cpu_", 0), 0u) << l.layer;
  }
  const std::string plan_text = run_qlm("inspect '" + dir.string() + "' --plan", status);
  ASSERT_EQ(status, 0) << plan_text;
  EXPECT_NE(plan_text.find(GetParam().method), std::string::npos) << plan_text;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, W8A8FixtureTest, ::testing::ValuesIn(fixtures()), test_name);

TEST(W8A8Fixtures, AllPresent) {
  for (const Fixture& f : fixtures()) EXPECT_TRUE(fs::exists(kRoot / f.name / "reference.safetensors")) << f.name;
}

// A kernel filter that exists for the family but cannot run the scheme: kernel.none with the reason.
TEST(W8A8Fixtures, PlanWithAKernelThatCannotRunTheSchemeListsItsReason) {
  int status = -1;
  const std::string out =
      run_qlm("inspect '" + (kRoot / "int8-dynamic").string() + "' --plan --linear-backend cpu_fast_fp8", status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("[kernel.none]"), std::string::npos) << out;
  EXPECT_NE(out.find("cpu_fast_fp8: weights are int8, not fp8"), std::string::npos) << out;
  EXPECT_NE(out.find("model.layers.0."), std::string::npos) << out;  // names the layer
}

}  // namespace
}  // namespace qlm::testing
