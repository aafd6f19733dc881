// Every model fixture (tests/data/models/*/ with reference.safetensors + expected.json) against the
// reference implementation: logits argmax identical at every position and normwise relative error
// within the fixture's tolerance, for every TP size it lists (which must also agree with each
// other), and greedy generation identical to the reference's greedy ids.
#include <gtest/gtest.h>

#include "models/model_fixtures.h"
#include "runtime/generation.h"
#include "runtime/model.h"
#include "runtime/sampling.h"

namespace qlm {
namespace {

using testing::ModelFixture;

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class ModelFixtureTest : public ::testing::TestWithParam<std::string> {};

void expect_argmax_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  const int64_t T = want.size(0), V = want.size(1);
  for (int64_t t = 0; t < T; ++t) {
    std::span<const float> g(got.data<float>() + t * V, static_cast<size_t>(V));
    std::span<const float> w(want.data<float>() + t * V, static_cast<size_t>(V));
    EXPECT_EQ(runtime::argmax(g), runtime::argmax(w)) << what << ": position " << t;
  }
}

TEST_P(ModelFixtureTest, LogitsMatchReferenceAtEveryTpSize) {
  const ModelFixture f = testing::load_model_fixture(GetParam());
  Tensor first;
  for (int tp : f.tp_sizes) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    auto model = runtime::Model::load(f.dir, {.tp = tp});
    ASSERT_EQ(model->vocab_size(), f.logits.size(1));
    const Tensor logits = model->forward(f.tokens);
    ASSERT_EQ(logits.shape(), f.logits.shape());
    const double err = testing::normwise_relative_error(logits, f.logits);
    EXPECT_LE(err, f.tolerance) << f.name << " tp " << tp << ": normwise relative error " << err;
    expect_argmax_equal(logits, f.logits, f.name);
    if (!first.defined()) {
      first = logits;
    } else {
      const double tp_err = testing::normwise_relative_error(logits, first);
      EXPECT_LE(tp_err, 1e-5) << f.name << ": tp " << tp << " vs tp " << f.tp_sizes.front();
      expect_argmax_equal(logits, first, f.name + " tp agreement");
    }
  }
}

TEST_P(ModelFixtureTest, GreedyGenerationMatchesReference) {
  const ModelFixture f = testing::load_model_fixture(GetParam());
  for (int tp : f.tp_sizes) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    auto model = runtime::Model::load(f.dir, {.tp = tp});
    const runtime::GenerationResult r = runtime::generate(
        *model, f.greedy_prompt, {.max_tokens = static_cast<int64_t>(f.greedy_new.size()), .sampling = {}, .eos_ids = {}});
    EXPECT_EQ(r.tokens, f.greedy_new) << f.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelFixtureTest, ::testing::ValuesIn(testing::model_fixture_names()), test_name);

TEST(ModelFixtures, Present) { EXPECT_GE(testing::model_fixture_names().size(), 10u); }

// The router status speaks of CUDA decode steps only: empty on the CPU, for a model with experts and without.
TEST(ModelFixtures, MoeRouterStatusIsEmptyOnTheCpu) {
  EXPECT_EQ(runtime::Model::load(testing::model_fixture_root() / "qwen3-moe")->moe_router_status(), "");
  EXPECT_EQ(runtime::Model::load(testing::model_fixture_root() / "llama-gqa")->moe_router_status(), "");
}

}  // namespace
}  // namespace qlm
