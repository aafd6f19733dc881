// The launcher of --tp-procs, with /bin/sh children instead of GPU ranks: success, exit statuses and
// signals named by rank and pid, exec failures, a child outliving rank 0, and children stopped when
// the launcher goes away.
#include "parallel/rank_processes.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "parallel/expect_error_all.h"

namespace qlm {
namespace {

using namespace std::chrono_literals;

// Scripts that wait `exec` their sleep: the pid the launcher stops is then the sleeping process itself. A sleep forked
// by the shell would outlive its killed shell, keep the test's output pipe open, and ctest would wait for it.
std::unique_ptr<RankProcesses> shell_ranks(int size, const std::function<std::string(int rank)>& script) {
  return RankProcesses::spawn("/bin/sh", size, [&](int rank) {
    return std::vector<std::string>{"sh", "-c", script(rank)};
  });
}

TEST(RankProcesses, ChildrenThatSucceedAreWaitedFor) {
  auto children = shell_ranks(4, [](int rank) { return "exit 0"; });
  EXPECT_EQ(children->pids().size(), 3u);
  children->wait(30s);
  children->check();
}

TEST(RankProcesses, FailingChildIsNamedByRankAndStatus) {
  auto children = shell_ranks(3, [](int rank) { return rank == 2 ? "exit 7" : "exit 0"; });
  const pid_t pid = children->pids()[1];
  EXPECT_QLM_ERROR_ALL(children->wait(30s), "tp.rank_failed",
                       "tensor-parallel rank 2 (pid " + std::to_string(pid) + ") exited with status 7",
                       "that rank's own error");
  EXPECT_QLM_ERROR_ALL(children->check(), "tp.rank_failed", "rank 2");
}

TEST(RankProcesses, KilledChildIsNamedBySignal) {
  auto children = shell_ranks(2, [](int) { return "kill -SEGV $$"; });
  EXPECT_QLM_ERROR_ALL(children->wait(30s), "tp.rank_failed", "rank 1", "was killed by signal 11");
}

TEST(RankProcesses, CheckDoesNotBlock) {
  auto children = shell_ranks(2, [](int) { return "exec sleep 30"; });
  const auto start = std::chrono::steady_clock::now();
  children->check();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST(RankProcesses, ChildOutlivingRankZeroIsStoppedAndNamed) {
  auto children = shell_ranks(2, [](int) { return "exec sleep 30"; });
  EXPECT_QLM_ERROR_ALL(children->wait(100ms), "tp.rank_timeout", "rank 1 (pid", "still ran");
}

TEST(RankProcesses, ExecFailureIsALaunchError) {
  EXPECT_QLM_ERROR_ALL(RankProcesses::spawn("/nonexistent/qlm", 2, [](int) { return std::vector<std::string>{"qlm"}; }),
                       "tp.launch", "cannot start tensor-parallel rank 1", "exec failed", "/nonexistent/qlm");
}

TEST(RankProcesses, ChildrenAreStoppedWhenTheLauncherGoesAway) {
  std::vector<pid_t> pids;
  const auto start = std::chrono::steady_clock::now();
  {
    auto children = shell_ranks(3, [](int) { return "exec sleep 60"; });
    pids = children->pids();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "pid " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }
}

TEST(RankProcesses, DescribesExitStatuses) {
  EXPECT_EQ(RankProcesses::describe_exit(1, 42, 3 << 8), "rank 1 (pid 42) exited with status 3");
  EXPECT_NE(RankProcesses::describe_exit(2, 43, SIGKILL).find("rank 2 (pid 43) was killed by signal 9"),
            std::string::npos);
}

}  // namespace
}  // namespace qlm
