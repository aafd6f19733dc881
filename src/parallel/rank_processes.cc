#include "parallel/rank_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace qlm {

namespace {

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
};

bool failed(int wait_status) { return !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0; }

constexpr const char* kRemedy =
    "read that rank's own error above; every rank runs the same command line with --tp-rank R, so a rank that "
    "fails alone usually lacks its GPU (--tp N needs N visible GPUs) or memory";

}  // namespace

struct RankProcesses::State {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<Child> children;
  std::string failure;  // the first failed child, described
  bool fatal = false;
  std::function<void()> cleanup;
  std::atomic<bool> stop{false};
  std::thread watcher;

  bool all_exited() const {
    for (const Child& c : children)
      if (!c.exited) return false;
    return true;
  }

  void watch() {
    while (!stop.load()) {
      {
        std::unique_lock lock(mu);
        bool changed = false;
        for (Child& c : children) {
          if (c.exited) continue;
          int st = 0;
          const pid_t got = ::waitpid(c.pid, &st, WNOHANG);
          if (got == 0 || (got < 0 && errno == EINTR)) continue;
          c.exited = true;
          c.status = got < 0 ? (127 << 8) : st;  // ECHILD: reaped elsewhere; count as failed
          changed = true;
          if (failed(c.status) && failure.empty()) failure = describe_exit(c.rank, c.pid, c.status);
        }
        if (!failure.empty() && fatal) {
          std::fprintf(stderr, "qlm: error: [tp.rank_failed] tensor-parallel %s; stopping the other ranks\n",
                       failure.c_str());
          for (const Child& c : children)
            if (!c.exited) ::kill(c.pid, SIGKILL);
          if (cleanup) cleanup();
          std::fflush(stderr);
          ::_exit(1);
        }
        if (changed) cv.notify_all();
        if (all_exited()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

RankProcesses::RankProcesses(std::shared_ptr<State> state) : state_(std::move(state)) {}

std::string RankProcesses::describe_exit(int rank, pid_t pid, int st) {
  if (WIFEXITED(st))
    return fmt::format("rank {} (pid {}) exited with status {}{}", rank, pid, WEXITSTATUS(st),
                       WEXITSTATUS(st) == 127 ? " (could not be started or reaped)" : "");
  if (WIFSIGNALED(st))
    return fmt::format("rank {} (pid {}) was killed by signal {} ({})", rank, pid, WTERMSIG(st),
                       ::strsignal(WTERMSIG(st)));
  return fmt::format("rank {} (pid {}) ended with wait status {:#x}", rank, pid, st);
}

std::unique_ptr<RankProcesses> RankProcesses::spawn(const std::filesystem::path& exe, int size,
                                                    const std::function<std::vector<std::string>(int)>& argv_for) {
  auto state = std::make_shared<State>();
  std::unique_ptr<RankProcesses> procs(new RankProcesses(state));
  const pid_t parent = ::getpid();
  for (int rank = 1; rank < size; ++rank) {
    // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
    const std::vector<std::string> args = argv_for(rank);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int pipe_fds[2];  // close-on-exec: EOF means exec succeeded, an int means errno of a failed exec
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
      fail("tp.launch", {}, "check the process and file limits (ulimit -u, -n)", "cannot create a pipe: {}",
           std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      fail("tp.launch", {}, "check the process limit (ulimit -u) and free memory",
           "cannot start tensor-parallel rank {}: fork failed: {}", rank, std::strerror(err));
    }
    if (pid == 0) {
      ::close(pipe_fds[0]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
      ::execv(exe.c_str(), argv.data());
      const int err = errno;
      [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], &err, sizeof(err));
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    int exec_errno = 0;
    ssize_t n;
    do n = ::read(pipe_fds[0], &exec_errno, sizeof(exec_errno));
    while (n < 0 && errno == EINTR);
    ::close(pipe_fds[0]);
    if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
      int st = 0;
      ::waitpid(pid, &st, 0);
      fail("tp.launch", {.file = exe.string(), .tensor = {}, .layer = {}},
           "check that the executable exists and may be run", "cannot start tensor-parallel rank {}: exec failed: {}",
           rank, std::strerror(exec_errno));
    }
    std::lock_guard lock(state->mu);
    state->children.push_back({.rank = rank, .pid = pid, .exited = false, .status = 0});
  }
  state->watcher = std::thread([state] { state->watch(); });
  return procs;
}

RankProcesses::~RankProcesses() {
  state_->stop = true;
  if (state_->watcher.joinable()) state_->watcher.join();
  std::lock_guard lock(state_->mu);
  for (const Child& c : state_->children)
    if (!c.exited) ::kill(c.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (Child& c : state_->children) {
    while (!c.exited) {
      int st = 0;
      const pid_t got = ::waitpid(c.pid, &st, WNOHANG);
      if (got == c.pid || (got < 0 && errno != EINTR)) {
        c.exited = true;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &st, 0);
        c.exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void RankProcesses::check(bool exit_is_failure) const {
  std::lock_guard lock(state_->mu);
  if (!state_->failure.empty()) fail("tp.rank_failed", {}, kRemedy, "tensor-parallel {}", state_->failure);
  if (exit_is_failure)
    for (const Child& c : state_->children)
      if (c.exited)
        fail("tp.rank_failed", {}, kRemedy, "tensor-parallel {} before the ranks met",
             describe_exit(c.rank, c.pid, c.status));
}

void RankProcesses::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mu);
  state_->cv.wait_for(lock, timeout, [&] { return state_->all_exited() || !state_->failure.empty(); });
  if (!state_->failure.empty()) fail("tp.rank_failed", {}, kRemedy, "tensor-parallel {}", state_->failure);
  if (!state_->all_exited()) {
    std::string running;
    for (const Child& c : state_->children)
      if (!c.exited) {
        running += fmt::format("{}rank {} (pid {})", running.empty() ? "" : ", ", c.rank, c.pid);
        ::kill(c.pid, SIGTERM);
      }
    fail("tp.rank_timeout", {}, "a rank that outlives rank 0 is stuck; run with NCCL_DEBUG=WARN to see where",
         "rank 0 finished but {} still ran {:.0f} s later; stopped", running,
         std::chrono::duration<double>(timeout).count());
  }
}

void RankProcesses::set_fatal(bool on, std::function<void()> cleanup) {
  std::lock_guard lock(state_->mu);
  state_->fatal = on;
  state_->cleanup = std::move(cleanup);
}

void RankProcesses::terminate() {
  std::lock_guard lock(state_->mu);
  for (const Child& c : state_->children)
    if (!c.exited) ::kill(c.pid, SIGTERM);
}

std::vector<pid_t> RankProcesses::pids() const {
  std::lock_guard lock(state_->mu);
  std::vector<pid_t> out;
  for (const Child& c : state_->children) out.push_back(c.pid);
  return out;
}

}  // namespace qlm
