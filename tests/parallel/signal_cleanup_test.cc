// The interrupt cleanup: a process that holds a SignalCleanup and gets SIGINT / SIGTERM / SIGHUP
// stops its children, removes the listed files and the directory, and still dies of that signal;
// several live cleanups all run; without a signal nothing is touched, and the previous handlers come
// back after the last one.
#include "parallel/signal_cleanup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>

#include "core/error.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;

// root/qlm-tp-test holding one small file per name.
fs::path dir_with(const testing::TempDir& root, std::initializer_list<const char*> names) {
  const fs::path dir = root / "qlm-tp-test";
  fs::create_directory(dir);
  for (const char* n : names) std::ofstream(dir / n) << "x";
  return dir;
}

// Forks a process that installs the cleanup for `dir` (files a, b and the never-created c) over a
// sleeping grandchild, signals itself with `sig`, and would exit 0 if it survived. Returns its wait
// status; *grandchild gets the grandchild's pid through a pipe.
int run_interrupted(const fs::path& dir, int sig, pid_t* grandchild) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const pid_t sleeper = ::fork();
    if (sleeper == 0) {
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    (void)!::write(fds[1], &sleeper, sizeof(sleeper));
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {  // not ignored, even in a background job
      struct sigaction current = {};
      ::sigaction(s, nullptr, &current);
      if (current.sa_handler == SIG_IGN) signal(s, SIG_DFL);
    }
    SignalCleanup cleanup(dir, {"a", "b", "c"}, {sleeper});
    ::raise(sig);
    ::_exit(0);
  }
  ::close(fds[1]);
  *grandchild = -1;
  EXPECT_EQ(::read(fds[0], grandchild, sizeof(*grandchild)), static_cast<ssize_t>(sizeof(*grandchild)));
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return status;
}

// The process has ended: no such pid, or a zombie waiting for whoever reaps orphans.
bool gone_soon(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(SignalCleanup, InterruptRemovesTheDirectoryStopsChildrenAndKeepsTheSignal) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    testing::TempDir root;
    const fs::path dir = dir_with(root, {"a", "b"});
    pid_t sleeper = -1;
    const int status = run_interrupted(dir, sig, &sleeper);
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << ": exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(fs::exists(dir)) << "signal " << sig;
    ASSERT_GT(sleeper, 0);
    EXPECT_TRUE(gone_soon(sleeper)) << "the child still runs after signal " << sig;
  }
}

TEST(SignalCleanup, ADirectoryWithOtherFilesStays) {
  testing::TempDir root;
  const fs::path dir = dir_with(root, {"a", "someone-elses"});
  pid_t sleeper = -1;
  const int status = run_interrupted(dir, SIGTERM, &sleeper);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(fs::exists(dir / "a"));
  EXPECT_TRUE(fs::exists(dir / "someone-elses"));
  EXPECT_TRUE(gone_soon(sleeper));
}

TEST(SignalCleanup, WithoutASignalNothingIsTouchedAndHandlersComeBack) {
  testing::TempDir root;
  const fs::path dir = dir_with(root, {"a"});
  struct sigaction before = {}, hup_before = {};
  ::sigaction(SIGTERM, nullptr, &before);
  signal(SIGHUP, SIG_IGN);  // as under nohup
  {
    SignalCleanup cleanup(dir, {"a"}, {});
    struct sigaction during = {}, hup = {};
    ::sigaction(SIGTERM, nullptr, &during);
    ::sigaction(SIGHUP, nullptr, &hup);
    EXPECT_NE(during.sa_handler, before.sa_handler);
    EXPECT_EQ(hup.sa_handler, SIG_IGN) << "an ignored signal stays ignored";
  }
  struct sigaction after = {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_TRUE(fs::exists(dir / "a"));
  ::sigaction(SIGHUP, nullptr, &hup_before);
  EXPECT_EQ(hup_before.sa_handler, SIG_IGN);
  signal(SIGHUP, SIG_DFL);
}

TEST(SignalCleanup, SeveralAtOnceAllRunAndHandlersComeBackAfterTheLast) {
  testing::TempDir root;
  const fs::path other = root / "other";
  fs::create_directory(other);
  std::ofstream(other / "f") << "x";
  struct sigaction before = {};
  ::sigaction(SIGTERM, nullptr, &before);
  {
    SignalCleanup outer(other, {"f"}, {});
    { SignalCleanup inner(root.path(), {}, {}); }
    struct sigaction during = {};
    ::sigaction(SIGTERM, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler) << "the outer cleanup still needs the handler";
    const fs::path dir = dir_with(root, {"a"});
    pid_t sleeper = -1;
    const int status = run_interrupted(dir, SIGTERM, &sleeper);  // the child inherits `outer` too
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    EXPECT_FALSE(fs::exists(dir));
    EXPECT_FALSE(fs::exists(other)) << "every live cleanup runs";
    EXPECT_TRUE(gone_soon(sleeper));
  }
  struct sigaction after = {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace qlm
