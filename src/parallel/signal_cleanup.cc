#include "parallel/signal_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "core/error.h"

namespace qlm {

struct SignalCleanup::State {
  std::string dir;
  std::vector<std::string> files;  // absolute paths
  std::vector<pid_t> children;
};

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxActive = 8;

// The live cleanups, read by the handler (lock-free); installing and removing take g_mutex.
std::atomic<const SignalCleanup::State*> g_active[kMaxActive];
std::mutex g_mutex;
int g_count = 0;
struct sigaction g_previous[std::size(kSignals)];

// Runs in the signal handler: only reads the prepared states and makes async-signal-safe calls.
void on_signal(int sig) {
  for (auto& slot : g_active) {
    const SignalCleanup::State* s = slot.exchange(nullptr);
    if (s == nullptr) continue;
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
  std::lock_guard<std::mutex> lock(g_mutex);
  bool placed = false;
  for (auto& slot : g_active) {
    const State* none = nullptr;
    if (slot.compare_exchange_strong(none, state_.get())) {
      placed = true;
      break;
    }
  }
  if (!placed)
    fail("tp.launch", {.file = state_->dir, .tensor = {}, .layer = {}}, "",
         "more than {} interrupt cleanups are active at once", kMaxActive);
  if (g_count++ > 0) return;
  struct sigaction act = {};
  act.sa_handler = on_signal;
  sigemptyset(&act.sa_mask);
  for (int sig : kSignals) sigaddset(&act.sa_mask, sig);  // one cleanup, whichever signal comes first
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    // A signal the user chose to ignore (nohup, a background job of a script) stays ignored.
    if (g_previous[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &act, nullptr);
  }
}

SignalCleanup::~SignalCleanup() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& slot : g_active) {
    const State* mine = state_.get();
    if (slot.compare_exchange_strong(mine, nullptr)) break;
  }
  if (--g_count == 0)
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

}  // namespace qlm
