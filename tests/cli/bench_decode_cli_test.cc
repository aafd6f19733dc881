// `qlm bench-decode synthetic:...` interrupted while it writes its synthetic checkpoint (several GB
// for real shapes) removes the checkpoint and ends by the signal, on the CPU; the Qwen3-MoE shape (one layer of
// 128 experts) loads and decodes on the CPU, its bytes per token counting 8 of the 128 experts, with the host's loop;
// on a GPU a fixture decodes with greedy steps queued on the device, or with the host's loop under
// QLM_DECODE_AHEAD=0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device.h"
#include "models/model_fixtures.h"
#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;

TEST(BenchDecodeCli, InterruptedSyntheticCheckpointIsRemoved) {
  testing::TempDir dir;
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::string q = [](const fs::path& p) { return "'" + p.string() + "'"; }(tmp);
  // The 8B shape with 4 layers is ~2 GB to write: long enough to be caught while writing.
  const std::string script = "'" + testing::qlm_binary().string() +
                             "' bench-decode synthetic:llama3-8b:layers=4 --device cpu --tokens 2 --tmp " + q +
                             " >/dev/null 2>/dev/null & p=$!; i=0; while [ $i -lt 1000 ] && ! ls " + q +
                             " | grep -q '^qlm-synthetic-'; do sleep 0.01; i=$((i+1)); done; sleep 0.2; "
                             "kill -TERM $p; wait $p; exit $?";
  std::ofstream(dir / "interrupt.sh") << script << "\n";
  const int status = std::system(("sh '" + (dir / "interrupt.sh").string() + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << "bench-decode should end by SIGTERM";
  for (const auto& e : fs::directory_iterator(tmp)) ADD_FAILURE() << "left over: " << e.path();
}

// Checkpoint bytes of one synthetic GPTQ linear layer K -> N, group 128: qweight, qzeros, scales, g_idx.
int64_t gptq_bytes(int64_t K, int64_t N) { return K / 8 * N * 4 + K / 128 * (N / 8) * 4 + K / 128 * N * 2 + K * 4; }

TEST(BenchDecodeCli, SyntheticQwen3MoeDecodesOnTheCpu) {
  testing::TempDir dir;
  const testing::QlmRun r = testing::run_qlm(
      "bench-decode synthetic:qwen3-30b-a3b:layers=1 --device cpu --tokens 2 --prompt-len 2 --json --tmp '" +
          dir.path().string() + "'",
      dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> lines = testing::json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const nlohmann::json& j = lines[0];
  EXPECT_GT(j.at("decode_tok_s").get<double>(), 0.0);
  // The CPU has no device loop: each step's logits go to the host.
  EXPECT_EQ(j.at("decode_loop").get<std::string>(), "host: each step's logits to the host");
  // Attention, the F16 router and lm_head in full; the 128 experts' gate / up / down as 8 of them.
  const int64_t attention = gptq_bytes(2048, 4096) + 2 * gptq_bytes(2048, 512) + gptq_bytes(4096, 2048);
  const int64_t router = 128 * 2048 * 2;
  const int64_t expert = 2 * gptq_bytes(2048, 768) + gptq_bytes(768, 2048);
  const int64_t want = attention + router + expert * 8 + gptq_bytes(2048, 151936);
  EXPECT_EQ(j.at("weight_bytes_per_token").get<int64_t>(), want);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().rfind("qlm-synthetic-", 0), std::string::npos) << "left over: " << e.path();
}

TEST(BenchDecodeCli, SyntheticOptionsAreCheckedBeforeAnythingIsWritten) {
  testing::TempDir dir;
  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"synthetic:llama3-8b:format=awq",
            "unknown synthetic option 'format=awq' in 'synthetic:llama3-8b:format=awq'"},
           {"synthetic:llama3-8b:format=fp8:layers=0", "bad layer count in 'synthetic:llama3-8b:format=fp8:layers=0'"},
           {"synthetic:llama3-9b:format=fp8", "unknown synthetic model 'llama3-9b'"}}) {
    const testing::QlmRun r =
        testing::run_qlm("bench-decode " + spec + " --device cpu --tokens 2 --tmp '" + dir.path().string() + "'", dir);
    EXPECT_NE(r.status, 0) << spec;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().rfind("qlm-synthetic-", 0), std::string::npos) << "written: " << e.path();
}

TEST(CudaBenchDecodeCli, GreedyStepsQueuedOnTheDevice) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  const std::string model = (testing::model_fixture_root() / "llama-gqa").string();
  for (const bool ahead : {true, false}) {
    if (!ahead) setenv("QLM_DECODE_AHEAD", "0", 1);  // the child inherits it
    const testing::QlmRun r =
        testing::run_qlm("bench-decode '" + model + "' --device cuda --tokens 8 --prompt-len 4 --json");
    if (!ahead) unsetenv("QLM_DECODE_AHEAD");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<nlohmann::json> lines = testing::json_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0].at("decode_loop").get<std::string>(),
              ahead ? "greedy on the device, steps queued ahead of the host" : "host: each step's logits to the host");
    EXPECT_EQ(lines[0].at("decode_step").get<std::string>().rfind("graph (", 0), 0u) << lines[0].dump();
  }
}

}  // namespace
}  // namespace qlm
