#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "runtime/sampling.h"
#include "support/expect_error.h"

namespace qlm::runtime {
namespace {

TEST(Sampling, GreedyTakesFirstLargest) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, NAN};
  Sampler s({.temperature = 0.0f});
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(argmax(logits), 1);
  const std::vector<float> nan_first = {NAN, -5.0f, -7.0f};
  EXPECT_EQ(argmax(nan_first), 1);
}

TEST(Sampling, TopKOneIsGreedy) {
  const std::vector<float> logits = {0.1f, 0.2f, 5.0f, 0.3f};
  Sampler s({.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .seed = 7});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits), 2);
}

TEST(Sampling, SeededIsDeterministic) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  Sampler a({.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  Sampler b({.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .seed = 42});
  Sampler c({.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .seed = 43});
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 64; ++i) {
    ra.push_back(a.sample(logits));
    rb.push_back(b.sample(logits));
    rc.push_back(c.sample(logits));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampling, TopKRestrictsToKLargest) {
  const std::vector<float> logits = {1.0f, 4.0f, 2.0f, 3.0f, 0.0f};
  Sampler s({.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = 1});
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(logits)];
  EXPECT_EQ(seen.size(), 2u);
  // softmax over {4, 3}: p(1) = e / (e + 1) ≈ 0.731
  EXPECT_NEAR(seen[1] / 2000.0, std::exp(1.0) / (std::exp(1.0) + 1.0), 0.04);
  EXPECT_GT(seen[3], 0);
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingMass) {
  // probabilities 0.5, 0.3, 0.15, 0.05 (logits = log p)
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.75f, .seed = 3});
  std::map<int32_t, int> seen;
  for (int i = 0; i < 3000; ++i) ++seen[s.sample(logits)];
  EXPECT_EQ(seen.size(), 2u);  // 0.5 + 0.3 >= 0.75
  EXPECT_NEAR(seen[1] / 3000.0, 0.5 / 0.8, 0.04);
  Sampler tiny({.temperature = 1.0f, .top_k = 0, .top_p = 0.1f, .seed = 3});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(tiny.sample(logits), 1);  // at least one token survives
}

TEST(Sampling, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = {0.0f, 1.0f};
  auto frequency_of_1 = [&](float t) {
    Sampler s({.temperature = t, .top_k = 0, .top_p = 1.0f, .seed = 9});
    int n = 0;
    for (int i = 0; i < 4000; ++i) n += s.sample(logits) == 1;
    return n / 4000.0;
  };
  EXPECT_NEAR(frequency_of_1(1.0f), std::exp(1.0) / (1 + std::exp(1.0)), 0.03);
  EXPECT_NEAR(frequency_of_1(0.25f), std::exp(4.0) / (1 + std::exp(4.0)), 0.02);
  EXPECT_NEAR(frequency_of_1(100.0f), 0.5, 0.03);
}

TEST(Sampling, RejectsInvalidParams) {
  EXPECT_QLM_ERROR(Sampler({.temperature = -1.0f}), "sampling.params", "temperature");
  EXPECT_QLM_ERROR(Sampler({.temperature = 1.0f, .top_k = -2}), "sampling.params", "top_k");
  EXPECT_QLM_ERROR(Sampler({.temperature = 1.0f, .top_k = 0, .top_p = 0.0f}), "sampling.params", "top_p");
  EXPECT_QLM_ERROR(Sampler({.temperature = 1.0f, .top_k = 0, .top_p = 1.5f}), "sampling.params", "top_p");
}

}  // namespace
}  // namespace qlm::runtime
