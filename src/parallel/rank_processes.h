// Child processes for the other ranks of a multi-process tensor-parallel group (`--tp-procs`): the
// launching process is rank 0 and starts ranks 1 .. size-1 as children (fork + exec), watches them
// from a thread, and reports any that fails by rank, pid and exit status or signal. Children die
// with their parent (PR_SET_PDEATHSIG), so a failed rank 0 never leaves ranks blocked in NCCL.
//
// Once the ranks are joined in collectives, a rank that dies leaves the others blocked for ever in
// NCCL. `set_fatal(true)` covers that stretch: the watcher then prints the failure, stops the other
// children, runs the cleanup and ends this process with status 1 instead of hanging.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace qlm {

class RankProcesses {
 public:
  // Starts one child per rank in [1, size): exe with argv_for(rank) (argv[0] included). Throws
  // "tp.launch" when a child cannot be started (the ones already started are stopped).
  static std::unique_ptr<RankProcesses> spawn(const std::filesystem::path& exe, int size,
                                              const std::function<std::vector<std::string>(int rank)>& argv_for);
  // Stops (SIGTERM, then SIGKILL after a grace period) and reaps the children still running.
  ~RankProcesses();
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // Throws "tp.rank_failed" naming the first child that has exited with a failure (nonzero status
  // or a signal) — or, with `exit_is_failure`, that has exited at all (before the ranks have met,
  // any exit is one). Does not block; meant as the rendezvous' poll hook.
  void check(bool exit_is_failure = false) const;
  // Waits for every child to exit; throws "tp.rank_failed" for the first that failed, or
  // "tp.rank_timeout" naming the ranks still running after `timeout` (they are then stopped).
  void wait(std::chrono::milliseconds timeout);
  // While on, a failed child makes the watcher print "qlm: error: ...", stop the other children,
  // call `cleanup` and _exit(1) this process (see the header comment).
  void set_fatal(bool on, std::function<void()> cleanup = {});
  // Sends SIGTERM to the children still running.
  void terminate();

  std::vector<pid_t> pids() const;

  // "rank 2 (pid 123) exited with status 3" / "... was killed by signal 9 (Killed)".
  static std::string describe_exit(int rank, pid_t pid, int wait_status);

 private:
  struct State;
  explicit RankProcesses(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace qlm
