// The command line of multi-process tensor parallelism, without a GPU: every combination of
// --tp / --tp-procs / --tp-rank / --rendezvous / --tp-gpu that cannot work is refused with a
// "cli.tp" error naming the options (generate, logits and bench-decode share them); a joined rank
// other than 0 names itself in its errors; and the launcher reports a qlm child that fails (here:
// on its arguments) by rank and exit status, with the child's own error on its stderr.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/device.h"
#include "models/model_fixtures.h"
#include "parallel/expect_error_all.h"
#include "parallel/nccl_comm.h"
#include "parallel/rank_processes.h"
#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::run_qlm;

std::string model() { return "'" + (testing::model_fixture_root() / "llama-gqa").string() + "'"; }

// `qlm logits MODEL --tokens 1 --out ... EXTRA`: exit status 1 and every fragment in stderr.
void expect_refused(const std::string& extra, std::initializer_list<std::string> fragments,
                    const std::string& command = "logits") {
  testing::TempDir dir;
  std::string args = command + " " + model() + " " + extra;
  if (command == "logits") args += " --tokens 1 --out '" + (dir / "o.safetensors").string() + "'";
  if (command == "generate") args += " --prompt hi";
  const testing::QlmRun r = run_qlm(args, dir);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  for (const std::string& f : fragments)
    EXPECT_NE(r.err.find(f), std::string::npos) << args << "\nlacks: " << f << "\n" << r.err;
  EXPECT_FALSE(fs::exists(dir / "o.safetensors"));
}

TEST(TpCli, TpRankNeedsAGroupARankInsideItCudaAndARendezvous) {
  expect_refused("--tp-rank 1 --rendezvous /tmp/x --device cuda", {"cli.tp", "--tp-rank 1 joins", "--tp is 1"});
  expect_refused("--tp 2 --tp-rank 2 --rendezvous /tmp/x --device cuda",
                 {"cli.tp", "--tp-rank 2 is outside the group of --tp 2", "--tp-rank 0 .. 1"});
  expect_refused("--tp 2 --tp-rank=-1 --rendezvous /tmp/x --device cuda",
                 {"cli.tp", "error: [cli.tp] --tp-rank -1 is outside"});
  expect_refused("--tp 2 --tp-rank 1 --device cuda",
                 {"cli.tp", "--tp-rank 1 needs --rendezvous", "tcp://HOST:PORT"});
  expect_refused("--tp 2 --tp-rank 1 --rendezvous /tmp/x", {"cli.tp", "the device is cpu", "--device cuda"});
}

TEST(TpCli, TpProcsNeedsCudaAGroupAndItsOwnRendezvous) {
  expect_refused("--tp 2 --tp-procs", {"cli.tp", "--tp-procs runs one process per GPU", "device is cpu"});
  expect_refused("--tp-procs --device cuda", {"cli.tp", "--tp-procs needs --tp 2 or more, got --tp 1"});
  expect_refused("--tp 2 --tp-procs --tp-rank 0 --device cuda", {"cli.tp", "--tp-procs makes this process rank 0"});
  expect_refused("--tp 2 --tp-procs --rendezvous /tmp/x --device cuda", {"cli.tp", "chooses its own rendezvous"});
  expect_refused("--tp 2 --tp-procs --tp-gpu 1 --device cuda", {"cli.tp", "--tp-gpu", "--device cuda:N"});
}

TEST(TpCli, RendezvousAndTpGpuAloneAreRefused) {
  expect_refused("--rendezvous /tmp/x", {"cli.tp", "--rendezvous is used only by a rank joining with --tp-rank"});
  expect_refused("--tp-gpu 1 --device cuda", {"cli.tp", "--tp-gpu sets the GPU of a rank joining"});
  expect_refused("--tp 2 --tp-rank 1 --rendezvous tcp://127.0.0.1 --device cuda",
                 {"comm.rendezvous", "not tcp://HOST:PORT", "tcp://127.0.0.1", "e.g. tcp://10.0.0.1:29500"});
  expect_refused("--tp 2 --tp-rank 0 --rendezvous /tmp/x --rendezvous-timeout 0 --device cuda",
                 {"cli.tp", "--rendezvous-timeout 0 is not positive"});
  expect_refused("--tp 2 --tp-rank 0 --rendezvous /tmp/x --tp-stall-timeout -1 --device cuda",
                 {"cli.tp", "--tp-stall-timeout -1 is not positive"});
}

TEST(TpCli, GenerateAndBenchDecodeShareTheChecks) {
  expect_refused("--tp 2 --tp-procs", {"cli.tp", "device is cpu"}, "generate");
  expect_refused("--tp-rank 1 --device cuda --rendezvous /tmp/x", {"cli.tp", "--tp is 1"}, "bench-decode");
}

TEST(TpCli, TpProcsWithoutEnoughGpusFailsBeforeStartingAnyRank) {
  if (cuda_devices().size() >= 2 && nccl_available()) GTEST_SKIP() << "this machine can run --tp 2 --tp-procs";
  const std::string why = !cuda_backend_built() ? "built without the CUDA backend"
                          : !nccl_available()   ? "needs NCCL"
                                                : "needs one GPU per rank";
  expect_refused("--tp 2 --tp-procs --device cuda", {why});
  // No rendezvous directory was left behind (they are made only once the checks pass).
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_NE(e.path().filename().string().rfind("qlm-tp-", 0), 0u) << "left over: " << e.path();
}

TEST(TpCli, JoinedRankNamesItselfInItsErrors) {
  testing::TempDir dir;
  const testing::QlmRun r = run_qlm("logits " + model() + " --tokens 1 --out '" + (dir / "o.safetensors").string() +
                                        "' --device cuda --tp 2 --tp-rank 1 --rendezvous '" + (dir / "meet").string() +
                                        "' --rendezvous-timeout 0.3",
                                    dir);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("tensor-parallel rank 1"), std::string::npos) << r.err;
  if (cuda_devices().empty() || !nccl_available()) return;  // refused for the device (JoinedRankLoad covers which)
  // With a GPU, rank 1 reaches the rendezvous and times out there: rank 0 never came.
  for (const char* f : {"comm.rendezvous", "1 of 2 ranks arrived", "missing: 0", "meet"})
    EXPECT_NE(r.err.find(f), std::string::npos) << f << "\n" << r.err;
}

// The launcher's failure path with real qlm children: each child is `qlm logits` with arguments it
// refuses, so it exits 1 at once; rank 0 learns which rank failed and how.
TEST(TpCli, LauncherReportsAQlmChildThatFails) {
  testing::TempDir dir;
  auto children = RankProcesses::spawn("/bin/sh", 3, [&](int rank) {
    const std::string err = (dir / ("err-" + std::to_string(rank))).string();
    const std::string qlm = "'" + testing::qlm_binary().string() + "' logits " + model() + " --tokens 1 --out '" +
                            (dir / "o.safetensors").string() + "' --device cuda --tp 2 --tp-rank " +
                            std::to_string(rank) + " --rendezvous '" + (dir / "meet").string() + "'";
    return std::vector<std::string>{"sh", "-c", qlm + " 2>'" + err + "'"};
  });
  // Rank 2 of --tp 2 is outside the group: that child fails on its arguments. Rank 1 is valid and
  // waits for rank 0 (or fails for the device on a machine without GPUs).
  const auto start = std::chrono::steady_clock::now();
  bool reported = false;
  while (!reported && std::chrono::steady_clock::now() - start < 60s) {
    try {
      children->check();
      std::this_thread::sleep_for(20ms);
    } catch (const Error& e) {
      reported = true;
      EXPECT_EQ(e.code(), "tp.rank_failed");
      EXPECT_NE(std::string(e.what()).find("exited with status 1"), std::string::npos) << e.what();
    }
  }
  ASSERT_TRUE(reported) << "no child failure was reported";
  // Without a GPU rank 1 fails too (for the device), and may be the one reported first: rank 2's error is then
  // read once it has been written (a slow start, e.g. under ASan, must not be cut short by stopping the children).
  const auto rank2_error = [&] {
    std::ifstream in(dir / "err-2");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const char* expected = "--tp-rank 2 is outside the group of --tp 2";
  while (rank2_error().find(expected) == std::string::npos && std::chrono::steady_clock::now() - start < 60s)
    std::this_thread::sleep_for(20ms);
  children.reset();  // stops rank 1 if it is still waiting
  const std::string err2 = rank2_error();
  EXPECT_NE(err2.find(expected), std::string::npos) << err2;
}

}  // namespace
}  // namespace qlm
