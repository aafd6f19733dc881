// `qlm bench-moe` on the CPU at a tiny custom shape: one JSON line per M with the documented fields
// (routed, dense-equivalent and floor times, experts touched, the kernels), and argument errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "support/run_qlm.h"

namespace qlm {
namespace {

using testing::run_qlm;

TEST(BenchMoeCli, CpuJsonLinePerM) {
  const testing::QlmRun r = run_qlm(
      "bench-moe --shape custom --hidden 128 --intermediate 64 --experts 6 --top-k 2 --format gptq --bits 4 "
      "--group 32 --m 1,5 --iters 3 --threads 1 --bandwidth-gbps 10 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> rows = testing::json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    EXPECT_EQ(j["m"], i == 0 ? 1 : 5);
    EXPECT_EQ(j["kernel"], "cpu_grouped");
    EXPECT_EQ(j["experts"], 6);
    EXPECT_EQ(j["top_k"], 2);
    EXPECT_EQ(j["timing"], "wall");
    EXPECT_GT(j["moe_us"].get<double>(), 0);
    EXPECT_GT(j["dense_us"].get<double>(), 0);
    const double touched = j["experts_touched"].get<double>();
    EXPECT_GE(touched, 2.0);
    EXPECT_LE(touched, i == 0 ? 2.0 : 6.0);
    EXPECT_DOUBLE_EQ(j["touched_bytes"].get<double>(), touched * j["expert_bytes"].get<double>());
    EXPECT_NEAR(j["floor_us"].get<double>(), j["touched_bytes"].get<double>() / (10.0 * 1e3), 1e-6);
  }
}

TEST(BenchMoeCli, ArgumentErrors) {
  const testing::QlmRun group = run_qlm(
      "bench-moe --shape custom --hidden 96 --intermediate 64 --experts 4 "
      "--top-k 2 --format gptq --group 64 --m 1");
  EXPECT_EQ(group.status, 1);
  EXPECT_NE(group.err.find("--group 64 does not divide"), std::string::npos) << group.err;
  const testing::QlmRun timing = run_qlm("bench-moe --m 1 --timing cupti");
  EXPECT_NE(timing.status, 0);
  EXPECT_NE(timing.err.find("--timing"), std::string::npos) << timing.err;
  const testing::QlmRun topk = run_qlm("bench-moe --shape custom --hidden 64 --intermediate 64 --experts 4 --top-k 5");
  EXPECT_EQ(topk.status, 1);
  EXPECT_NE(topk.err.find("top-k=5"), std::string::npos) << topk.err;
  if (!cuda_backend_built() || cuda_devices().empty()) {
    const testing::QlmRun cuda = run_qlm("bench-moe --device cuda --m 1");
    EXPECT_EQ(cuda.status, 1);
    EXPECT_NE(cuda.err.find(cuda_backend_built() ? "no CUDA device" : "built without CUDA"), std::string::npos)
        << cuda.err;
  }
}

// The JSON lines of a `qlm` run that must succeed.
std::vector<nlohmann::json> bench_moe_json(const std::string& args) {
  const testing::QlmRun r = run_qlm(args);
  EXPECT_EQ(r.status, 0) << r.err;
  return testing::json_lines(r.out);
}

// On the GPU (scripts/gpu_check.sh): the grouped WNA16 layer only enqueues device work at a few tokens, so each call
// is timed from a CUDA graph of its own; the per-expert bf16 layer reads the expert counts on the host, so it falls
// back to events; --timing events is eager for both.
TEST(CudaBenchMoeCli, GraphTimingWhereTheLayerNeverWaits) {
  if (!cuda_backend_built() || cuda_devices().empty()) GTEST_SKIP() << "needs a CUDA device";
  const std::string shape =
      "bench-moe --device cuda --shape custom --hidden 256 --intermediate 128 --experts 6 "
      "--top-k 2 --m 1,3 --iters 3 --json ";
  const auto timings = [&](const std::string& args) {
    std::vector<std::string> out;
    for (const nlohmann::json& j : bench_moe_json(shape + args)) {
      EXPECT_GT(j["moe_us"].get<double>(), 0);
      EXPECT_GT(j["dense_us"].get<double>(), 0);
      out.push_back(j["timing"].get<std::string>());
    }
    return out;
  };
  EXPECT_EQ(timings("--format gptq --bits 4 --group 64"), (std::vector<std::string>{"graph", "graph"}));
  EXPECT_EQ(timings("--format gptq --bits 4 --group 64 --timing events"),
            (std::vector<std::string>{"events", "events"}));
  EXPECT_EQ(timings("--format bf16"), (std::vector<std::string>{"events", "events"}));
}

// The JSON names the experts' path: 4-bit g64 experts with BF16 activations on the tensor-core grouped kernel, 8-bit
// ones on the CUDA-core GEMV; the floor's bandwidth is the GPU's measured copy bandwidth.
TEST(CudaBenchMoeCli, NamesTheGroupedKernel) {
  if (!cuda_backend_built() || cuda_devices().empty()) GTEST_SKIP() << "needs a CUDA device";
  const std::string shape =
      "bench-moe --device cuda --shape custom --hidden 256 --intermediate 128 --experts 6 --top-k 2 --m 1 --iters 2 "
      "--json --format gptq --group 64 ";
  const auto path = [&](const std::string& args) {
    const std::vector<nlohmann::json> lines = bench_moe_json(shape + args);
    EXPECT_EQ(lines.size(), 1u) << args;
    if (lines.empty()) return std::string();
    EXPECT_GT(lines[0]["bandwidth_gbps"].get<double>(), 100.0);
    return lines[0].value("path", std::string("(none)"));
  };
  EXPECT_EQ(path("--bits 4"), "grouped WNA16, tensor cores (8-row tiles)");
  EXPECT_EQ(path("--bits 8"), "grouped WNA16, CUDA-core GEMV");
}

}  // namespace
}  // namespace qlm
