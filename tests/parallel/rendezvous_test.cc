// The file rendezvous of multi-process tensor parallelism (no GPU needed): ranks meeting as threads
// and as processes (this test binary re-run as children through RankProcesses), the timeout's text
// (path, ranks arrived and missing), duplicate ranks and left-over directories, and a child that
// dies while rank 0 waits being reported at once by the poll hook.
#include "parallel/rendezvous.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "parallel/expect_error_all.h"
#include "parallel/rank_processes.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

NcclId id_from(char seed) {
  NcclId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(seed + static_cast<char>(i * 5));
  return id;
}

NcclId never_called() {
  ADD_FAILURE() << "only rank 0 makes the id";
  return {};
}

TEST(Rendezvous, ThreadsMeetAndGetRankZerosId) {
  testing::TempDir tmp;
  const fs::path dir = tmp / "meet";  // created by the first rank to arrive
  constexpr int kSize = 4;
  std::vector<NcclId> got(kSize);
  std::vector<std::thread> threads;
  for (int r = kSize - 1; r >= 0; --r)  // rank 0 last: the others wait for its id
    threads.emplace_back([&, r] {
      if (r == 0) std::this_thread::sleep_for(50ms);
      const RendezvousOptions o{.dir = dir, .rank = r, .size = kSize, .timeout = 10s, .poll = {}};
      got[static_cast<size_t>(r)] = rendezvous(o, r == 0 ? [] { return id_from(7); } : never_called);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], id_from(7)) << "rank " << r;
  for (int r = 0; r < kSize; ++r) EXPECT_TRUE(fs::exists(dir / rendezvous_rank_file(r)));
  // Only complete files, no temporaries, are left.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, static_cast<size_t>(kSize + 1));
}

TEST(Rendezvous, TimeoutNamesThePathAndTheMissingRanks) {
  testing::TempDir tmp;
  const fs::path dir = tmp / "alone";
  const RendezvousOptions o{.dir = dir, .rank = 0, .size = 3, .timeout = 100ms, .poll = {}};
  EXPECT_QLM_ERROR_ALL(rendezvous(o, [] { return id_from(1); }), "comm.rendezvous", "1 of 3 ranks arrived",
                       "missing: 1, 2", dir.string(), "--rendezvous-timeout");
}

TEST(Rendezvous, RankWithoutRankZeroSaysTheIdIsMissing) {
  testing::TempDir tmp;
  const RendezvousOptions o{.dir = tmp.path(), .rank = 1, .size = 2, .timeout = 60ms, .poll = {}};
  EXPECT_QLM_ERROR_ALL(rendezvous(o, never_called), "comm.rendezvous", "rank 1 waited", "1 of 2 ranks arrived",
                       "missing: 0", "rank 0 has not published the NCCL id");
}

TEST(Rendezvous, SecondProcessWithTheSameRankIsRefused) {
  testing::TempDir tmp;
  const RendezvousOptions o{.dir = tmp.path(), .rank = 1, .size = 2, .timeout = 30ms, .poll = {}};
  EXPECT_QLM_ERROR_ALL(rendezvous(o, never_called), "comm.rendezvous", "arrived");  // leaves rank-1 behind
  EXPECT_QLM_ERROR_ALL(rendezvous(o, never_called), "comm.rendezvous", "rank 1 has already joined", "pid",
                       "fresh rendezvous directory");
}

TEST(Rendezvous, LeftOverIdIsRefusedByRankZero) {
  testing::TempDir tmp;
  tmp.write(kRendezvousIdFile, std::string(128, 'x'));
  const RendezvousOptions o{.dir = tmp.path(), .rank = 0, .size = 2, .timeout = 30ms, .poll = {}};
  EXPECT_QLM_ERROR_ALL(rendezvous(o, [] { return id_from(2); }), "comm.rendezvous", "already holds an NCCL id",
                       "fresh rendezvous directory");
}

TEST(Rendezvous, BadArgumentsAreClearErrors) {
  testing::TempDir tmp;
  EXPECT_QLM_ERROR_ALL(rendezvous({.dir = tmp.path(), .rank = 2, .size = 2, .timeout = 10ms, .poll = {}}, never_called),
                       "comm.rendezvous", "rank 2 does not fit a group of 2");
  EXPECT_QLM_ERROR_ALL(rendezvous({.dir = {}, .rank = 0, .size = 2, .timeout = 10ms, .poll = {}}, never_called),
                       "comm.rendezvous", "no rendezvous directory");
  const fs::path file = tmp.write("plain-file", "x");
  EXPECT_QLM_ERROR_ALL(rendezvous({.dir = file, .rank = 1, .size = 2, .timeout = 10ms, .poll = {}}, never_called),
                       "comm.rendezvous", "not a directory");
}

TEST(Rendezvous, PollHookCanGiveUp) {
  testing::TempDir tmp;
  int polls = 0;
  const RendezvousOptions o{.dir = tmp.path(), .rank = 0, .size = 2, .timeout = 10s, .poll = [&] {
                              if (++polls == 3) fail("test.poll", {}, "", "gave up after {} polls", polls);
                            }};
  EXPECT_QLM_ERROR_ALL(rendezvous(o, [] { return id_from(3); }), "test.poll", "gave up after 3 polls");
}

// A child process of the test below: this binary, re-run with only this test selected and the
// rendezvous given in the environment. It joins as its rank and writes the id it got.
TEST(RendezvousChildProcess, JoinsFromTheEnvironment) {
  const char* spec = std::getenv("QLM_TEST_RENDEZVOUS");  // "DIR|RANK|SIZE"
  if (spec == nullptr) GTEST_SKIP() << "runs only as the child of Rendezvous.ProcessesMeetThroughTheLauncher";
  const std::string s = spec;
  const size_t a = s.find('|'), b = s.find('|', a + 1);
  const fs::path dir = s.substr(0, a);
  const int rank = std::stoi(s.substr(a + 1, b - a - 1)), size = std::stoi(s.substr(b + 1));
  const NcclId id = rendezvous({.dir = dir, .rank = rank, .size = size, .timeout = 20s, .poll = {}}, never_called);
  std::ofstream(dir / ("got-" + std::to_string(rank)), std::ios::binary).write(id.data(), 128);
}

TEST(Rendezvous, ProcessesMeetThroughTheLauncher) {
  testing::TempDir tmp;
  const fs::path dir = tmp / "procs";
  constexpr int kSize = 3;
  // The children read the rendezvous from the environment they inherit (this test is single-threaded). They must run
  // their one test whatever share of the tests this process runs (ctest's `suite` shards, tests/CMakeLists.txt).
  const testing::ScopedEnv no_shards("GTEST_TOTAL_SHARDS", nullptr), no_shard_index("GTEST_SHARD_INDEX", nullptr);
  ::setenv("QLM_TEST_RENDEZVOUS", fmt::format("{}|{}|{}", dir.string(), 0, kSize).c_str(), 1);
  std::unique_ptr<RankProcesses> children;
  const auto argv_for = [&](int rank) {
    ::setenv("QLM_TEST_RENDEZVOUS", fmt::format("{}|{}|{}", dir.string(), rank, kSize).c_str(), 1);
    return std::vector<std::string>{"/proc/self/exe", "--gtest_filter=RendezvousChildProcess.JoinsFromTheEnvironment"};
  };
  // argv_for runs right before each fork, so each child inherits its own rank.
  children = RankProcesses::spawn("/proc/self/exe", kSize, argv_for);
  ::unsetenv("QLM_TEST_RENDEZVOUS");
  const NcclId id =
      rendezvous({.dir = dir, .rank = 0, .size = kSize, .timeout = 60s, .poll = [&] { children->check(); }},
                 [] { return id_from(9); });
  EXPECT_EQ(id, id_from(9));
  children->wait(60s);
  for (int r = 1; r < kSize; ++r) {
    NcclId got{};
    std::ifstream in(dir / ("got-" + std::to_string(r)), std::ios::binary);
    ASSERT_TRUE(in.read(got.data(), 128)) << "rank " << r << " wrote no id";
    EXPECT_EQ(got, id_from(9)) << "rank " << r;
  }
}

TEST(Rendezvous, ChildThatDiesIsReportedWhileRankZeroWaits) {
  testing::TempDir tmp;
  int runs = 0;
  for (const auto& [script, expected] :
       std::vector<std::pair<std::string, std::string>>{{"exit 3", "exited with status 3"},
                                                        {"kill -9 $$", "was killed by signal 9"},
                                                        {"exit 0", "exited with status 0 before the ranks met"}}) {
    auto children = RankProcesses::spawn("/bin/sh", 2, [&](int) {
      return std::vector<std::string>{"sh", "-c", script};
    });
    const fs::path dir = tmp / ("dies-" + std::to_string(++runs));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_QLM_ERROR_ALL(rendezvous({.dir = dir,
                                     .rank = 0,
                                     .size = 2,
                                     .timeout = 30s,
                                     .poll = [&] { children->check(/*exit_is_failure=*/true); }},
                                    [] { return id_from(4); }),
                         "tp.rank_failed", "tensor-parallel rank 1 (pid", expected);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "reported at once, not at the timeout";
  }
}

}  // namespace
}  // namespace qlm
