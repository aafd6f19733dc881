// Cleanup of temporary state when the process is interrupted (`--tp-procs`' rendezvous directory,
// `bench-decode`'s synthetic checkpoint): while a SignalCleanup lives, SIGINT, SIGTERM and SIGHUP
// stop the given child processes (SIGTERM), remove the given files and then the directory, and end
// the process by the same signal with its default action, so Ctrl-C leaves nothing behind and the
// shell still sees the signal. A signal already ignored when the first one is installed (nohup,
// background jobs of scripts) stays ignored. The handler makes only async-signal-safe calls (kill,
// unlink, rmdir, sigaction, raise) on paths prepared as C strings beforehand. Up to 8 may be alive
// at once: a signal runs all of them; when the last one goes, the previous handlers come back.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace qlm {

class SignalCleanup {
 public:
  // `file_names` are relative to `dir`: every file the directory may hold (a file that does not
  // exist is skipped; the directory stays when it holds another).
  SignalCleanup(const std::filesystem::path& dir, const std::vector<std::string>& file_names,
                const std::vector<pid_t>& children);
  ~SignalCleanup();
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace qlm
