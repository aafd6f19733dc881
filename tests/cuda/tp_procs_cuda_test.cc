// Multi-process tensor parallelism on GPUs, through the built `qlm` binary: --tp 2 --tp-procs (rank 0
// launches rank 1) and two ranks started by hand with --tp-rank / --rendezvous give the logits of one
// GPU; sampled generation gives the same text as the in-process --tp 2 (rank 0's tokens are
// broadcast); bench-decode runs with --tp-procs. NCCL cannot put two ranks on one GPU, so every test
// needs 2 visible GPUs and skips otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "io/safetensors.h"
#include "models/model_fixtures.h"
#include "parallel/nccl_comm.h"
#include "runtime/sampling.h"
#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;
using testing::run_qlm;

#define SKIP_WITHOUT_TWO_GPUS()                                                                               \
  if (cuda_devices().size() < 2 || !nccl_available())                                                         \
  GTEST_SKIP() << "multi-process tensor parallelism needs 2 visible GPUs and NCCL (" << cuda_devices().size() \
               << " visible); NCCL cannot put two ranks on one GPU"

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

std::string ids(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s += (s.empty() ? "" : " ") + std::to_string(t);
  return s;
}

Tensor logits_of(const testing::TempDir& dir, const testing::ModelFixture& f, const std::string& dtype,
                 const std::string& extra, const std::string& name) {
  const fs::path out = dir / (name + ".safetensors");
  const testing::QlmRun r = run_qlm("logits " + quoted(f.dir) + " --tokens \"" + ids(f.tokens) + "\" --out " +
                                        quoted(out) + " --device cuda --dtype " + dtype + " " + extra,
                                    dir);
  EXPECT_EQ(r.status, 0) << extra << "\n" << r.err;
  if (r.status != 0) return {};
  return io::SafetensorsFile::open(out).tensor("logits").contiguous();
}

void expect_same_argmax(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const int64_t T = want.size(0), V = want.size(1);
  for (int64_t t = 0; t < T; ++t) {
    const std::span<const float> g(got.data<float>() + t * V, static_cast<size_t>(V));
    const std::span<const float> w(want.data<float>() + t * V, static_cast<size_t>(V));
    EXPECT_EQ(runtime::argmax(g), runtime::argmax(w)) << what << " position " << t;
  }
}

TEST(CudaTpProcs, TwoProcessesGiveTheLogitsOfOneGpu) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  for (const std::string name : {"llama-gqa", "llama-gqa-gptq", "qwen2-bias-tied-gptq"}) {
    const testing::ModelFixture f = testing::load_model_fixture(name);
    const Tensor one = logits_of(dir, f, "f32", "--tp 1", name + "-tp1");
    const Tensor two = logits_of(dir, f, "f32", "--tp 2 --tp-procs", name + "-procs");
    if (!one.defined() || !two.defined()) continue;
    expect_same_argmax(two, one, name + " f32 --tp 2 --tp-procs vs --tp 1");
    EXPECT_LE(testing::normwise_relative_error(two, one), 1e-5) << name;
    // BF16 activations: within the reduced-precision tolerance of the in-process TP 2.
    const Tensor threads = logits_of(dir, f, "bf16", "--tp 2", name + "-bf16-threads");
    const Tensor procs = logits_of(dir, f, "bf16", "--tp 2 --tp-procs", name + "-bf16-procs");
    if (threads.defined() && procs.defined()) {
      EXPECT_LE(testing::normwise_relative_error(procs, threads), 3e-2) << name;
    }
  }
  // Nothing is left in the temp dir by the launcher.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_NE(e.path().filename().string().rfind("qlm-tp-", 0), 0u) << "left over: " << e.path();
}

TEST(CudaTpProcs, RanksStartedByHandMeetThroughTheRendezvous) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  const testing::ModelFixture f = testing::load_model_fixture("llama-gqa-gptq");
  const Tensor one = logits_of(dir, f, "f32", "--tp 1", "tp1");
  const std::string common =
      "'" + testing::qlm_binary().string() + "' logits " + quoted(f.dir) + " --tokens \"" + ids(f.tokens) +
      "\" --device cuda --dtype f32 --tp 2 --rendezvous-timeout 120 --rendezvous " + quoted(dir / "meet");
  // Rank 1 starts first and waits for rank 0.
  const std::string script = common + " --tp-rank 1 --out " + quoted(dir / "rank1.safetensors") + " 2>" +
                             quoted(dir / "err1") + " & " + common + " --tp-rank 0 --out " +
                             quoted(dir / "rank0.safetensors") + " 2>" + quoted(dir / "err0") +
                             "; s0=$?; wait $!; s1=$?; exit $((s0 + s1))";
  std::ofstream(dir / "ranks.sh") << script << "\n";
  const int status = std::system(("sh " + quoted(dir / "ranks.sh")).c_str());
  ASSERT_EQ(status, 0) << "see " << dir.path();
  EXPECT_FALSE(fs::exists(dir / "rank1.safetensors")) << "only rank 0 writes results";
  const Tensor two = io::SafetensorsFile::open(dir / "rank0.safetensors").tensor("logits").contiguous();
  expect_same_argmax(two, one, "ranks by hand vs --tp 1");
  EXPECT_LE(testing::normwise_relative_error(two, one), 1e-5);
}

TEST(CudaTpProcs, SampledGenerationMatchesTheInProcessGroup) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa-gptq";
  const std::string args = "generate " + quoted(model) +
                           " --prompt 'Hello world' --max-tokens 24 --temperature 0.9 --top-k 20 --seed 11 "
                           "--device cuda --dtype f32 --tp 2";
  // Both capture each decode step as a CUDA graph with its NCCL calls inside.
  const testing::QlmRun threads = run_qlm(args, dir);
  ASSERT_EQ(threads.status, 0) << threads.err;
  const testing::QlmRun procs = run_qlm(args + " --tp-procs", dir);
  ASSERT_EQ(procs.status, 0) << procs.err;
  EXPECT_EQ(procs.out, threads.out) << "rank 0 prints the text once; the same seed gives the same tokens";
  EXPECT_NE(procs.err.find("tensor parallel: 2 ranks, one process per GPU"), std::string::npos) << procs.err;
  EXPECT_NE(procs.err.find("decode step: graph"), std::string::npos) << procs.err;
}

// Interrupting rank 0 while the ranks load: the launcher stops its children, removes its rendezvous
// directory and ends by the signal. SIGTERM here: a script's background job ignores SIGINT (and the
// launcher leaves ignored signals ignored); Ctrl-C's SIGINT takes the same handler.
TEST(CudaTpProcs, InterruptedLauncherLeavesNoRendezvousDirectory) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::string script = "TMPDIR=" + quoted(tmp) + " '" + testing::qlm_binary().string() +
                             "' bench-decode synthetic:llama3-8b:layers=1 --tmp " + quoted(tmp) +
                             " --device cuda --tp 2 --tp-procs --tokens 64 >/dev/null 2>" + quoted(dir / "err") +
                             " & p=$!; i=0; while [ $i -lt 3000 ] && ! ls " + quoted(tmp) +
                             " | grep -q '^qlm-tp-'; do sleep 0.02; i=$((i+1)); done; sleep 0.3; kill -TERM $p; wait $p; exit $?";
  std::ofstream(dir / "interrupt.sh") << script << "\n";
  const int status = std::system(("sh " + quoted(dir / "interrupt.sh")).c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << "qlm should end by SIGTERM; see " << dir.path();
  for (const auto& e : fs::directory_iterator(tmp))
    EXPECT_NE(e.path().filename().string().rfind("qlm-tp-", 0), 0u) << "left over: " << e.path();
}

// Two ranks started by hand; rank 1 is killed once it has reached the rendezvous. Rank 0 must not
// wait for it for ever in NCCL: its stall watchdog (--tp-stall-timeout) or NCCL itself ends it with
// an error within seconds.
TEST(CudaTpProcs, RankWhosePeerDiesStopsWithAnError) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  const testing::ModelFixture f = testing::load_model_fixture("llama-gqa-gptq");
  const std::string common = "'" + testing::qlm_binary().string() + "' bench-decode " + quoted(f.dir) +
                             " --device cuda --dtype f32 --tp 2 --tokens 100 --tp-stall-timeout 5 --rendezvous " +
                             quoted(dir / "meet");
  const std::string script =
      common + " --tp-rank 1 >/dev/null 2>/dev/null & p1=$!; i=0; while [ $i -lt 3000 ] && [ ! -e " +
      quoted(dir / "meet" / "rank-1") + " ]; do sleep 0.02; i=$((i+1)); done; kill -KILL $p1; timeout 120 " +
      common + " --tp-rank 0 >/dev/null 2>" + quoted(dir / "err0") + "; exit $?";
  std::ofstream(dir / "ranks.sh") << script << "\n";
  const int status = std::system(("sh " + quoted(dir / "ranks.sh")).c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1) << "124 would mean rank 0 hung; see " << dir.path();
  std::stringstream err;
  err << std::ifstream(dir / "err0").rdbuf();
  EXPECT_TRUE(err.str().find("tp.stalled") != std::string::npos || err.str().find("comm.") != std::string::npos)
      << err.str();
}

TEST(CudaTpProcs, BenchDecodeRunsOneProcessPerGpu) {
  SKIP_WITHOUT_TWO_GPUS();
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa-gptq";
  const testing::QlmRun r =
      run_qlm("bench-decode " + quoted(model) + " --device cuda --tp 2 --tp-procs --tokens 8 --json", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"tp\":2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tp_procs\":true"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one JSON line, from rank 0 only:\n" << r.out;
}

}  // namespace
}  // namespace qlm
