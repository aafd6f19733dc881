// `qlm bench-attention`: argument errors everywhere; on a GPU, one JSON line per context with the
// documented fields (capacity from --capacity-factor, the chunk count it gives, the floor from the bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "cuda/device.h"
#include "support/run_qlm.h"

#ifdef QLM_WITH_CUDA
#include "runtime/ops/cuda/launch.h"
#endif

namespace qlm {
namespace {

using testing::run_qlm;

TEST(BenchAttentionCli, ArgumentErrors) {
  const testing::QlmRun heads = run_qlm("bench-attention --shape custom --heads 6 --kv-heads 4 --head-dim 64");
  EXPECT_EQ(heads.status, 1);
  EXPECT_NE(heads.err.find("heads=6 kv_heads=4"), std::string::npos) << heads.err;
  const testing::QlmRun factor = run_qlm("bench-attention --capacity-factor 0.5");
  EXPECT_EQ(factor.status, 1);
  EXPECT_NE(factor.err.find("--capacity-factor 0.5 < 1"), std::string::npos) << factor.err;
  const testing::QlmRun shape = run_qlm("bench-attention --shape llama9");
  EXPECT_EQ(shape.status, 1);
  EXPECT_NE(shape.err.find("unknown --shape llama9"), std::string::npos) << shape.err;
  if (!cuda_backend_built() || cuda_devices().empty()) {
    const testing::QlmRun cuda = run_qlm("bench-attention --context 16");
    EXPECT_EQ(cuda.status, 1);
    EXPECT_NE(cuda.err.find(cuda_backend_built() ? "no CUDA device" : "this qlm has none"), std::string::npos)
        << cuda.err;
  }
}

#ifdef QLM_WITH_CUDA
constexpr bool lanes_by_rule(int64_t chunks) { return qlm::ops::cu::attention_lanes_by_rule(chunks); }
#else
constexpr bool lanes_by_rule(int64_t) { return false; }  // no CUDA backend: the test below skips
#endif

TEST(CudaBenchAttentionCli, JsonLinePerContext) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  const testing::QlmRun r = run_qlm(
      "bench-attention --shape custom --heads 8 --kv-heads 2 --head-dim 64 --context 0,300 "
      "--capacity-factor 2 --layers 3 --iters 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> rows = testing::json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    const int64_t context = i == 0 ? 0 : 300;
    EXPECT_EQ(j["context"], context);
    EXPECT_EQ(j["capacity"], std::max<int64_t>(16, 2 * (context + 1)));  // the cache's first size is 16 at least
    EXPECT_EQ(j["chunks"], i == 0 ? 0 : 3);                              // 602 slots: 3 chunks of 256
    EXPECT_EQ(j["layers"], 3);
    // Group of 4, head size 64: the decode kernel (its lanes form where the rule has it: attention_lanes_by_rule), one
    // block per SM at most (per-head with the decode forms off).
    const bool decode = env_switch_on("QLM_ATTENTION_DECODE"),
               lanes_set = std::getenv("QLM_ATTENTION_LANES") != nullptr;
    if (!decode) {
      EXPECT_EQ(j["form"], i == 0 ? "per-head" : "per-head chunked");
    } else if (!lanes_set) {
      const bool lanes = lanes_by_rule(i == 0 ? 0 : 3);
      EXPECT_EQ(j["form"], lanes ? "decode lanes" : "decode");
    }
    EXPECT_GT(j["us"].get<double>(), 0);
    // K and V of context + 1 slots (2 kv heads x 64, bf16), the F32 query in, the BF16 output.
    const double bytes = 2.0 * static_cast<double>((context + 1) * 128 * 2) + 4.0 * 512 + 2.0 * 512;
    EXPECT_DOUBLE_EQ(j["bytes"].get<double>(), bytes);
    EXPECT_NEAR(j["floor_us"].get<double>(), bytes / (j["copy_gbps"].get<double>() * 1e3), 1e-9);
  }
}

}  // namespace
}  // namespace qlm
