// Whole models on CUDA against the CPU path (which model_fixture_test checks against the reference):
// for every fixture, F32 activations give the CPU's argmax at every position and logits within
// 1e-4 (normwise relative); BF16/F16 activations stay within 3e-2 and give the CPU's argmax at every
// position whose CPU top-2 margin is at least 2 % of the row's largest |logit| (a smaller margin can
// flip under the ~1 % deviation of reduced-precision activations, so near-ties are not compared, but at
// least a quarter of the positions must be); greedy
// generation with F32 gives the CPU's tokens, and a prefill of a few hundred tokens matches too; BF16 single-token
// decode steps stay as close to the CPU's as a BF16 prefill.
// The KV cache on the device: decoding token by token (through capacity growth) and continuing
// after reset() give the logits of one prefill. Greedy decoding with the steps queued on the device gives the host
// loop's tokens and keeps exactly the steps it reports. Skipped without a visible GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "models/model_fixtures.h"
#include "parallel/nccl_comm.h"
#include "runtime/generation.h"
#include "runtime/model.h"
#include "runtime/sampling.h"
#include "runtime/tokenizer/tokenizer.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;
using testing::ModelFixture;

#define SKIP_WITHOUT_GPU() \
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device visible"

runtime::ModelOptions cuda_options(DType act, KVCacheDType kv = KVCacheDType::F32) {
  runtime::ModelOptions o;
  o.device = Device::cuda(0);
  o.act_dtype = act;
  o.kv_cache_dtype = kv;
  return o;
}

struct Agreement {
  int64_t same = 0, total = 0;  // over the compared positions
  int64_t skipped = 0;          // near-ties: margin below the threshold
  std::string first_differing;  // "position 3: 17 vs 250, ..." (up to 5)
  double fraction() const { return total ? static_cast<double>(same) / static_cast<double>(total) : 1.0; }
};

// Positions whose reference top-2 margin is below `min_margin` x the row's largest |logit| are not
// compared (0: every position is).
Agreement argmax_agreement(const Tensor& got, const Tensor& want, double min_margin = 0) {
  Agreement a;
  const int64_t T = want.size(0), V = want.size(1);
  int listed = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = want.data<float>() + t * V;
    const int32_t g = runtime::argmax(std::span<const float>(got.data<float>() + t * V, static_cast<size_t>(V)));
    const int32_t w = runtime::argmax(std::span<const float>(row, static_cast<size_t>(V)));
    if (min_margin > 0) {
      float second = -INFINITY, largest = 0;
      for (int64_t v = 0; v < V; ++v) {
        largest = std::max(largest, std::fabs(row[v]));
        if (v != w) second = std::max(second, row[v]);
      }
      if (row[w] - second < min_margin * largest) {
        ++a.skipped;
        continue;
      }
    }
    ++a.total;
    if (g == w) {
      ++a.same;
    } else if (listed++ < 5) {
      a.first_differing += "position " + std::to_string(t) + ": " + std::to_string(g) + " vs " + std::to_string(w) + "; ";
    }
  }
  return a;
}

// Deterministic pseudo-random token ids in [0, vocab).
std::vector<int32_t> random_tokens(int64_t count, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  uint32_t s = seed;
  for (int32_t& id : ids) {
    s = s * 1664525u + 1013904223u;
    id = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// Logits of `tokens` on the CPU (tp 1) and on cuda:0 with `act` activations.
std::pair<Tensor, Tensor> cpu_and_cuda_logits(const fs::path& dir, const std::vector<int32_t>& tokens, DType act) {
  auto cpu = runtime::Model::load(dir);
  auto gpu = runtime::Model::load(dir, cuda_options(act));
  EXPECT_EQ(gpu->act_dtype(), act);
  return {cpu->forward(tokens), gpu->forward(tokens)};
}

// Logits within `max_error` (normwise relative) and the CPU's argmax at every position whose margin
// is at least `min_margin` of the row's scale (0: at every position).
void expect_close_to_cpu(const std::string& what, const Tensor& gpu, const Tensor& cpu, double max_error,
                         double min_margin) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_TRUE(gpu.on_host() && gpu.dtype() == DType::F32) << what << ": logits " << gpu.str();
  const double err = testing::normwise_relative_error(gpu, cpu);
  const Agreement a = argmax_agreement(gpu, cpu, min_margin);
  EXPECT_LE(err, max_error) << what << ": normwise relative error " << err << " (argmax agreement " << a.same << "/"
                            << a.total << ")";
  EXPECT_EQ(a.same, a.total) << what << ": argmax agreement " << a.same << "/" << a.total << " compared positions ("
                             << a.skipped << " near-ties skipped; relative error " << err << "); cuda vs cpu at "
                             << a.first_differing;
  EXPECT_GE(4 * a.total, a.total + a.skipped) << what << ": only " << a.total << " of " << a.total + a.skipped
                                              << " positions have a clear margin";
}

// The logits [steps, V] of one single-token step per token of `steps`, after whatever the model already holds.
Tensor step_logits(runtime::Model& model, std::span<const int32_t> steps) {
  const int64_t n = static_cast<int64_t>(steps.size()), V = model.vocab_size();
  Tensor logits = Tensor::empty({n, V}, DType::F32);
  for (int64_t t = 0; t < n; ++t) {
    const Tensor row = model.forward(steps.subspan(static_cast<size_t>(t), 1), false);
    std::copy(row.data<float>(), row.data<float>() + V, logits.data<float>() + t * V);
  }
  return logits;
}

class CudaModelFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModelFixtureTest, F32LogitsMatchCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  const auto [cpu, gpu] = cpu_and_cuda_logits(f.dir, f.tokens, DType::F32);
  expect_close_to_cpu(f.name + " F32, " + std::to_string(f.tokens.size()) + " tokens", gpu, cpu, 1e-4, 0);
}

TEST_P(CudaModelFixtureTest, Bf16LogitsCloseToCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  const auto [cpu, gpu] = cpu_and_cuda_logits(f.dir, f.tokens, DType::BF16);
  expect_close_to_cpu(f.name + " BF16, " + std::to_string(f.tokens.size()) + " tokens", gpu, cpu, 3e-2, 0.02);
}

TEST_P(CudaModelFixtureTest, F16LogitsCloseToCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  const auto [cpu, gpu] = cpu_and_cuda_logits(f.dir, f.tokens, DType::F16);
  expect_close_to_cpu(f.name + " F16, " + std::to_string(f.tokens.size()) + " tokens", gpu, cpu, 3e-2, 0.02);
}

TEST_P(CudaModelFixtureTest, LongPrefillF32MatchesCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  const std::vector<int32_t> tokens = random_tokens(300, f.logits.size(1), 7);
  const auto [cpu, gpu] = cpu_and_cuda_logits(f.dir, tokens, DType::F32);
  expect_close_to_cpu(f.name + " F32, 300 tokens", gpu, cpu, 1e-4, 0);
}

// Single-token decode steps in BF16, the path a served model takes (for the MoE fixtures: the router folded into the
// routing kernel), against the CPU's F32 steps over the same 5-token prompt and 16 tokens after it.
TEST_P(CudaModelFixtureTest, Bf16DecodeCloseToCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  auto cpu = runtime::Model::load(f.dir);
  auto gpu = runtime::Model::load(f.dir, cuda_options(DType::BF16));
  const std::vector<int32_t> tokens = random_tokens(21, f.logits.size(1), 13);
  const std::span<const int32_t> prompt = std::span<const int32_t>(tokens).first(5);
  cpu->forward(prompt, false);
  gpu->forward(prompt, false);
  const std::span<const int32_t> steps = std::span<const int32_t>(tokens).subspan(5);
  expect_close_to_cpu(f.name + " BF16 decode, 16 steps", step_logits(*gpu, steps), step_logits(*cpu, steps), 3e-2,
                      0.02);
}

// Whether the fixture's decode steps are captured: every model but MoE ones with unquantized experts
// (cuda_grouped runs those one by one after reading the expert counts on the host).
bool decodes_with_graph(const ModelFixture& f, const runtime::Model& model) {
  const bool wna16 = f.name.ends_with("-gptq") || f.name.ends_with("-ct-w4a16") || f.name.ends_with("-awq");
  return !model.config().moe.enabled() || wna16;
}

TEST_P(CudaModelFixtureTest, F32GreedyGenerationMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  const runtime::GenerationOptions gen{.max_tokens = 16, .sampling = {}, .eos_ids = {}};
  auto cpu = runtime::Model::load(f.dir);
  auto gpu = runtime::Model::load(f.dir, cuda_options(DType::F32));
  const runtime::GenerationResult want = runtime::generate(*cpu, f.greedy_prompt, gen);
  const runtime::GenerationResult got = runtime::generate(*gpu, f.greedy_prompt, gen);
  EXPECT_EQ(got.tokens, want.tokens) << f.name << " F32: 16 greedy tokens on cuda:0 vs cpu";
  EXPECT_FALSE(want.chosen_on_device) << f.name;
  EXPECT_EQ(got.chosen_on_device, decodes_with_graph(f, *gpu)) << f.name << ": " << gpu->decode_graph_status();
  EXPECT_EQ(got.stats.decode_steps, static_cast<int64_t>(got.tokens.size()) - 1) << f.name;
}

// Single-token decode steps as a captured CUDA graph (the default) against the same steps launched
// kernel by kernel (--cuda-graph off), BF16 activations: the same kernels on the same data, so the
// logits agree to rounding-free equality in practice (1e-6 allowed) with the same argmax. Dense
// models and MoE models with weight-only integer experts (cuda_grouped's grouped launch, no host
// wait) report their graph; MoE models with unquantized experts (run one by one after reading the
// expert counts on the host) say why they decode eagerly. 24 steps after a 5-token prompt grow the
// KV cache 16 -> 32 slots: the graph is captured again at the new size.
TEST_P(CudaModelFixtureTest, GraphDecodeMatchesEagerDecode) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  runtime::ModelOptions eager_options = cuda_options(DType::BF16);
  eager_options.cuda_graph = false;
  auto graph = runtime::Model::load(f.dir, cuda_options(DType::BF16));
  auto eager = runtime::Model::load(f.dir, eager_options);
  const std::vector<int32_t> tokens = random_tokens(29, f.logits.size(1), 5);
  const std::span<const int32_t> prompt = std::span<const int32_t>(tokens).first(5);
  EXPECT_EQ(testing::normwise_relative_error(graph->forward(prompt), eager->forward(prompt)), 0.0) << f.name;
  const std::span<const int32_t> steps = std::span<const int32_t>(tokens).subspan(5);
  expect_close_to_cpu(f.name + " bf16: graph decode vs eager decode", step_logits(*graph, steps),
                      step_logits(*eager, steps), 1e-6, 0);
  EXPECT_EQ(eager->decode_graph_status(), "eager: off (--cuda-graph off)") << f.name;
  if (!decodes_with_graph(f, *graph)) {
    const std::string status = graph->decode_graph_status();
    EXPECT_TRUE(status.starts_with("eager: mixture-of-experts layer ")) << status;
    EXPECT_NE(status.find("its experts are not all weight-only integer"), std::string::npos) << status;
  } else {
    EXPECT_TRUE(graph->decode_graph_status().starts_with("graph (")) << f.name << ": " << graph->decode_graph_status();
  }
}

// The host loop of a greedy decode over `steps` graph steps after `prompt` (forward one token, runtime::argmax of its
// logits), from `first`: the tokens chosen.
std::vector<int32_t> host_greedy(runtime::Model& model, std::span<const int32_t> prompt, int32_t first, int64_t steps) {
  model.reset();
  model.forward(prompt, false);
  std::vector<int32_t> chosen;
  int32_t token = first;
  for (int64_t i = 0; i < steps; ++i) {
    const Tensor logits = model.forward(std::span<const int32_t>(&token, 1), false);
    token = runtime::argmax(std::span<const float>(logits.data<float>(), static_cast<size_t>(logits.size(1))));
    chosen.push_back(token);
  }
  return chosen;
}

// Greedy decoding with the host out of the loop (Model::decode_greedy: steps queued on the device, each choosing
// its successor there) against the host loop over the same graph steps, BF16: the same tokens over 40 steps (the KV
// cache grows 16 -> 32 -> 64 slots on the way, so the graph is captured again); stopped after 7 choices, the
// sequence holds exactly those 7 steps (the ones queued past them ran but are not kept) and continues with the host
// loop's logits. Models whose steps cannot be a graph get nullopt and nothing runs.
TEST_P(CudaModelFixtureTest, DeviceGreedyDecodeMatchesHostLoop) {
  SKIP_WITHOUT_GPU();
  const ModelFixture f = testing::load_model_fixture(GetParam());
  auto host = runtime::Model::load(f.dir, cuda_options(DType::BF16));
  auto dev = runtime::Model::load(f.dir, cuda_options(DType::BF16));
  const std::vector<int32_t> prompt = random_tokens(5, f.logits.size(1), 21);
  const int32_t first = 3;
  const std::vector<int32_t> want = host_greedy(*host, prompt, first, 40);
  dev->forward(prompt, false);
  std::vector<int32_t> got;
  std::optional<int64_t> steps = dev->decode_greedy(first, 40, [&](int32_t t) {
    got.push_back(t);
    return true;
  });
  if (!decodes_with_graph(f, *dev)) {
    EXPECT_FALSE(steps.has_value()) << f.name;
    EXPECT_TRUE(got.empty()) << f.name;
    EXPECT_EQ(dev->cache_length(), 5) << f.name;
    return;
  }
  ASSERT_TRUE(steps.has_value()) << f.name << ": " << dev->decode_graph_status();
  EXPECT_EQ(*steps, 40) << f.name;
  EXPECT_EQ(got, want) << f.name << ": greedy tokens, device loop vs host loop";
  EXPECT_EQ(dev->cache_length(), 45) << f.name;

  dev->reset(5);
  got.clear();
  steps = dev->decode_greedy(first, 40, [&](int32_t t) {
    got.push_back(t);
    return got.size() < 7;
  });
  ASSERT_TRUE(steps.has_value()) << f.name;
  EXPECT_EQ(*steps, 7) << f.name;
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + 7)) << f.name;
  ASSERT_EQ(dev->cache_length(), 12) << f.name;
  host->reset(12);  // the prompt, then `first` and want[0..5] forwarded
  const int32_t next = want[6];
  expect_close_to_cpu(f.name + ": the step after a stopped device loop vs the host loop's",
                      dev->forward(std::span<const int32_t>(&next, 1), false),
                      host->forward(std::span<const int32_t>(&next, 1), false), 1e-6, 0);
}

// 600 device-chosen steps (three segments of queued steps, the cache growing to 1024 slots, so attention takes its
// chunked form inside the graph) give the host loop's tokens; QLM_DECODE_AHEAD=0 is not needed for the host loop
// (forward() never chooses on the device).
TEST(CudaModelTest, DeviceGreedyDecodeOverSegments) {
  SKIP_WITHOUT_GPU();
  const fs::path dir = testing::model_fixture_root() / "llama-gqa";
  auto host = runtime::Model::load(dir, cuda_options(DType::BF16));
  auto dev = runtime::Model::load(dir, cuda_options(DType::BF16));
  const std::vector<int32_t> prompt = random_tokens(9, dev->vocab_size(), 23);
  const std::vector<int32_t> want = host_greedy(*host, prompt, 5, 600);
  dev->forward(prompt, false);
  std::vector<int32_t> got;
  const std::optional<int64_t> steps = dev->decode_greedy(5, 600, [&](int32_t t) {
    got.push_back(t);
    return true;
  });
  ASSERT_TRUE(steps.has_value()) << dev->decode_graph_status();
  EXPECT_EQ(*steps, 600);
  EXPECT_EQ(got, want);
  EXPECT_EQ(dev->cache_length(), 609);
}

// Every fixture, the mixture-of-experts ones (Mixtral, Qwen2-MoE with its shared expert, Qwen3-MoE;
// float and GPTQ / compressed-tensors W4A16 experts) included: they run on the cuda_grouped kernel.
std::vector<std::string> cuda_fixture_names() { return testing::model_fixture_names(); }

INSTANTIATE_TEST_SUITE_P(CudaFixtures, CudaModelFixtureTest, ::testing::ValuesIn(cuda_fixture_names()), test_name);

// What a single-token step does with a mixture-of-experts model's routers, as generate and bench-decode print it:
// folded into the routing kernel with BF16 / F16 activations, its own linear layer with F32 (and why); nothing for
// a model without experts.
TEST(CudaModelTest, MoeRouterStatusSaysWhetherTheRouterIsFolded) {
  SKIP_WITHOUT_GPU();
  const fs::path moe = testing::model_fixture_root() / "qwen3-moe";
  for (const DType act : {DType::BF16, DType::F16})
    EXPECT_EQ(runtime::Model::load(moe, cuda_options(act))->moe_router_status(), "folded into the MoE routing kernel")
        << dtype_name(act);
  EXPECT_EQ(runtime::Model::load(moe, cuda_options(DType::F32))->moe_router_status(),
            "its own linear layer (F32 activations: the fold takes F16 / BF16)");
  EXPECT_EQ(
      runtime::Model::load(testing::model_fixture_root() / "llama-gqa", cuda_options(DType::F32))->moe_router_status(),
      "");
}

TEST(CudaModelTest, DefaultModelGreedyMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const fs::path dir = fs::path(QLM_SOURCE_DIR) / "models" / "default";
  const auto tokenizer = runtime::Tokenizer::from_model_dir(dir);
  const std::vector<int32_t> prompt = tokenizer->encode("The secret of a happy life is", true);
  const runtime::GenerationOptions gen{.max_tokens = 20, .sampling = {}, .eos_ids = tokenizer->eos_ids()};
  auto cpu = runtime::Model::load(dir);
  auto gpu = runtime::Model::load(dir, cuda_options(DType::F32));
  const std::vector<int32_t> want = runtime::generate(*cpu, prompt, gen).tokens;
  const std::vector<int32_t> got = runtime::generate(*gpu, prompt, gen).tokens;
  EXPECT_EQ(got, want) << "models/default F32: greedy tokens on cuda:0 vs cpu; cuda text: "
                       << tokenizer->decode(got, true) << " | cpu text: " << tokenizer->decode(want, true);
}

// Token-by-token decode (the cache grows 16 → 32 → 64 slots on the way) and a continuation after
// reset() give the logits of one prefill on the GPU; the sliding-window fixture's window (6) is
// far shorter than the sequence.
TEST(CudaModelTest, DecodeStepByStepEqualsPrefill) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"llama-gqa", "mistral-swa", "qwen3-qknorm-gptq"})
    for (const KVCacheDType kv : {KVCacheDType::F32, KVCacheDType::BF16}) {
      const std::string what = std::string(name) + " kv " + kv_cache_dtype_name(kv);
      const fs::path dir = testing::model_fixture_root() / name;
      auto model = runtime::Model::load(dir, cuda_options(DType::F32, kv));
      const std::vector<int32_t> tokens = random_tokens(40, model->vocab_size(), 11);
      const Tensor prefill = model->forward(tokens);
      ASSERT_EQ(model->cache_length(), 40) << what;

      model->reset();
      const int64_t V = model->vocab_size();
      Tensor steps = Tensor::empty({40, V}, DType::F32);
      for (size_t t = 0; t < tokens.size(); ++t) {
        const Tensor row = model->forward(std::span<const int32_t>(&tokens[t], 1), /*all_logits=*/false);
        ASSERT_EQ(row.shape(), (Shape{1, V})) << what;
        std::copy(row.data<float>(), row.data<float>() + V, steps.data<float>() + static_cast<int64_t>(t) * V);
      }
      expect_close_to_cpu(what + ": step-by-step decode vs prefill", steps, prefill, 1e-4, 0);

      // Keep 25 tokens, run the other 15 at once: the rows of the prefill.
      model->reset(25);
      const Tensor rest = model->forward(std::span<const int32_t>(tokens).subspan(25));
      expect_close_to_cpu(what + ": continuation after reset(25) vs prefill", rest, prefill.narrow(0, 25, 15).clone(),
                          1e-4, 0);
    }
}

// Decode after a 300-token prefill: the cache holds 600 slots, so attention takes its chunked form
// (three chunks of 256 slots per head) inside the captured decode graph; each step's logits match
// the CPU's, also with a sliding window (mistral-swa: 6) shorter than a chunk.
TEST(CudaModelTest, LongContextDecodeMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"llama-gqa", "mistral-swa"}) {
    const fs::path dir = testing::model_fixture_root() / name;
    auto cpu = runtime::Model::load(dir);
    auto gpu = runtime::Model::load(dir, cuda_options(DType::F32));
    const std::vector<int32_t> tokens = random_tokens(306, gpu->vocab_size(), 13);
    const std::span<const int32_t> all(tokens);
    expect_close_to_cpu(std::string(name) + ": 300-token prefill", gpu->forward(all.first(300), false),
                        cpu->forward(all.first(300), false), 1e-4, 0);
    for (size_t t = 300; t < tokens.size(); ++t)
      expect_close_to_cpu(std::string(name) + ": decode step at position " + std::to_string(t),
                          gpu->forward(all.subspan(t, 1), false), cpu->forward(all.subspan(t, 1), false), 1e-4, 0);
    EXPECT_TRUE(gpu->decode_graph_status().starts_with("graph (")) << gpu->decode_graph_status();
  }
}

TEST(CudaModelTest, TensorParallelNeedsOneGpuPerRank) {
  SKIP_WITHOUT_GPU();
  runtime::ModelOptions o = cuda_options(DType::BF16);
  o.tp = static_cast<int>(cuda_devices().size()) + 1;
  EXPECT_QLM_ERROR(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", o), "model.tp",
                   nccl_available() ? "one GPU per rank" : "needs NCCL");
}

// TP over NCCL, one GPU per rank: logits equal one GPU's (F32 activations) for every fixture the
// GPU runs. Needs >= 2 GPUs.
TEST(CudaModelTest, TensorParallelOverNcclMatchesOneGpu) {
  SKIP_WITHOUT_GPU();
  if (cuda_devices().size() < 2 || !nccl_available()) GTEST_SKIP() << "needs 2 GPUs and NCCL";
  for (const std::string& name : cuda_fixture_names()) {
    const ModelFixture f = testing::load_model_fixture(name);
    auto one = runtime::Model::load(f.dir, cuda_options(DType::F32));
    runtime::ModelOptions o = cuda_options(DType::F32);
    o.tp = 2;
    auto two = runtime::Model::load(f.dir, o);
    ASSERT_EQ(two->tp(), 2);
    expect_close_to_cpu(f.name + " tp 2 vs tp 1 on cuda", two->forward(f.tokens), one->forward(f.tokens), 1e-5, 0);
    // Decode steps: each rank's step is a captured graph with its NCCL calls inside (dense models).
    const std::vector<int32_t> next = random_tokens(4, f.logits.size(1), 17);
    for (size_t t = 0; t < next.size(); ++t) {
      const std::span<const int32_t> one_token(&next[t], 1);
      expect_close_to_cpu(f.name + " tp 2 vs tp 1 on cuda, decode step " + std::to_string(t),
                          two->forward(one_token, false), one->forward(one_token, false), 1e-5, 0);
    }
    if (decodes_with_graph(f, *two)) {
      EXPECT_TRUE(two->decode_graph_status().starts_with("graph (")) << f.name << ": " << two->decode_graph_status();
    }
  }
}

TEST(CudaModelTest, MissingDeviceIndexIsRefused) {
  SKIP_WITHOUT_GPU();
  runtime::ModelOptions o = cuda_options(DType::BF16);
  o.device = Device::cuda(static_cast<int>(cuda_devices().size()));
  EXPECT_QLM_ERROR(runtime::Model::load(testing::model_fixture_root() / "llama-gqa", o), "device.unavailable",
                   "CUDA device(s) are visible");
}

TEST(CudaModelTest, DefaultActivationDtypeIsBf16) {
  SKIP_WITHOUT_GPU();
  runtime::ModelOptions o;
  o.device = Device::cuda(0);
  EXPECT_EQ(runtime::activation_dtype(o), DType::BF16);
  auto model = runtime::Model::load(testing::model_fixture_root() / "llama-gqa", o);
  EXPECT_EQ(model->act_dtype(), DType::BF16);
  EXPECT_EQ(model->device(), Device::cuda(0));
}

}  // namespace
}  // namespace qlm
