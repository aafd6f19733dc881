// `qlm bench-linear --json`: one line per M with the fixed contract of docs/performance.md (times, rates, the
// layer and the kernel), copies as --rotate asks; bad arguments named with a remedy; on a GPU, --calls sets the calls
// per timed iteration, cycling through the copies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/device.h"
#include "support/run_qlm.h"

namespace qlm {
namespace {

TEST(BenchLinearCli, CpuLinesCarryTheContract) {
  const testing::QlmRun r = testing::run_qlm(
      "bench-linear --format gptq --bits 4 --group 128 --k 256 --n 64 --m 1,3 --iters 2 --rotate 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> lines = testing::json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json& j = lines[i];
    EXPECT_EQ(j.at("m").get<int64_t>(), i == 0 ? 1 : 3) << j.dump();
    EXPECT_EQ(j.at("k").get<int64_t>(), 256);
    EXPECT_EQ(j.at("n").get<int64_t>(), 64);
    EXPECT_EQ(j.at("bits").get<int>(), 4);
    EXPECT_EQ(j.at("group").get<int>(), 128);
    EXPECT_EQ(j.at("format").get<std::string>(), "gptq");
    EXPECT_FALSE(j.at("kernel").get<std::string>().empty());
    EXPECT_EQ(j.at("copies").get<int>(), 2);
    EXPECT_FALSE(j.contains("calls")) << "calls is a CUDA timing field";
    const double median = j.at("median_us").get<double>(), min = j.at("min_us").get<double>();
    EXPECT_GT(min, 0.0);
    EXPECT_LE(min, median);
    EXPECT_GT(j.at("gflops").get<double>(), 0.0);
    EXPECT_GT(j.at("weight_gbps").get<double>(), 0.0);
    EXPECT_GT(j.at("weight_bytes").get<int64_t>(), 256 * 64 / 2);  // the codes, plus scales
  }
}

TEST(BenchLinearCli, BadTimingArgumentsAreNamed) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--calls 4", "--calls is for CUDA timing (remedy: leave --calls out on the CPU)"},
      {"--calls -1", "--calls must be >= 0"},
      {"--rotate -1", "--rotate must be >= 0"},
      {"--iters 0", "--iters must be positive"},
  };
  for (const auto& c : cases) {
    const testing::QlmRun r = testing::run_qlm(std::string("bench-linear --k 256 --n 64 ") + c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(CudaBenchLinearCli, CallsCycleThroughTheCopies) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  for (const std::string timing : {"graph", "events"}) {
    for (const auto& [extra, copies, calls] : {std::tuple{"--rotate 2 --calls 6", 2, 6}, std::tuple{"--rotate 3", 3, 3},
                                               std::tuple{"--rotate 1 --calls 5", 1, 5}}) {
      const testing::QlmRun r = testing::run_qlm(
          "bench-linear --device cuda --format gptq --k 512 --n 256 --m 1,17 "
          "--iters 2 --json --timing " +
          timing + " " + extra);
      ASSERT_EQ(r.status, 0) << extra << ": " << r.err;
      const std::vector<nlohmann::json> lines = testing::json_lines(r.out);
      ASSERT_EQ(lines.size(), 2u) << r.out;
      for (const nlohmann::json& j : lines) {
        EXPECT_EQ(j.at("copies").get<int>(), copies) << extra << " " << j.dump();
        EXPECT_EQ(j.at("calls").get<int>(), calls) << extra << " " << j.dump();
        EXPECT_EQ(j.at("timing").get<std::string>(), timing);
        EXPECT_GT(j.at("median_us").get<double>(), 0.0);
      }
    }
  }
}

}  // namespace
}  // namespace qlm
