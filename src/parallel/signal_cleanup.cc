#include "parallel/signal_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "core/error.h"

namespace qlm {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<const SignalCleanup::State*> g_active{nullptr};

}  // namespace

struct SignalCleanup::State {
  std::string dir;
  std::vector<std::string> files;  // absolute paths
  std::vector<pid_t> children;
  struct sigaction previous[3] = {};
};

namespace {

// Runs in the signal handler: only reads the prepared state and makes async-signal-safe calls.
void on_signal(int sig) {
  if (const SignalCleanup::State* s = g_active.exchange(nullptr)) {
    for (pid_t pid : s->children)
      if (pid > 0) ::kill(pid, SIGTERM);
    for (const std::string& f : s->files) ::unlink(f.c_str());
    ::rmdir(s->dir.c_str());
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // delivered when the handler returns: the process ends by `sig`
}

}  // namespace

SignalCleanup::SignalCleanup(const std::filesystem::path& dir, const std::vector<std::string>& file_names,
                             const std::vector<pid_t>& children)
    : state_(std::make_unique<State>()) {
  state_->dir = dir.string();
  for (const std::string& f : file_names) state_->files.push_back((dir / f).string());
  state_->children = children;
  const State* none = nullptr;
  if (!g_active.compare_exchange_strong(none, state_.get()))
    fail("tp.launch", {}, "run one tensor-parallel launch per process at a time",
         "a second interrupt cleanup was installed while one is active");
  struct sigaction act = {};
  act.sa_handler = on_signal;
  sigemptyset(&act.sa_mask);
  for (int sig : kSignals) sigaddset(&act.sa_mask, sig);  // one cleanup, whichever signal comes first
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &state_->previous[i]);
    // A signal the user chose to ignore (nohup, a background job of a script) stays ignored.
    if (state_->previous[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &act, nullptr);
  }
}

SignalCleanup::~SignalCleanup() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &state_->previous[i], nullptr);
  const State* mine = state_.get();
  g_active.compare_exchange_strong(mine, nullptr);
}

}  // namespace qlm
