// Multi-process tensor parallelism for the commands that load a model (generate, logits,
// bench-decode), one process per GPU:
//   --tp N --tp-procs               this process becomes rank 0 and starts ranks 1..N-1 as children
//                                   (/proc/self/exe with the same arguments, less --tp-procs, plus
//                                   --tp-rank r --rendezvous DIR), in a fresh temp dir it removes
//   --tp N --tp-rank R --rendezvous DIR   this process joins a group as rank R (the user, or a
//                                   launcher such as srun / mpirun, starts every rank)
// Only rank 0 prints results; the other ranks print nothing but errors, prefixed with their rank.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/rank_processes.h"
#include "parallel/signal_cleanup.h"
#include "runtime/model.h"
#include "tools/qlm/model_options.h"

namespace qlm::cli {

class TpLaunch {
 public:
  // Without --tp-procs: nothing to do. With it: checks that this machine has a GPU per rank (and
  // NCCL), makes a fresh rendezvous directory, starts the children and makes `options` rank 0 of
  // the group. `model_arg` replaces the MODEL argument in the children's command line when not
  // empty (bench-decode hands them the synthetic checkpoint rank 0 wrote). From here until
  // finish(), a child that fails ends this process with an error naming its rank and exit status,
  // and SIGINT / SIGTERM / SIGHUP stop the children and remove the directory before this process
  // ends by the signal.
  static TpLaunch start(const ModelCliOptions& cli, runtime::ModelOptions& options,
                        const std::filesystem::path& model_arg = {});
  // Every rank calls it when its work is done: the rank leaves its group (Model::leave_group, which
  // waits for every rank on the host to leave, so rank 0 must not wait for its children before),
  // then rank 0 waits for the children (throws "tp.rank_failed" / "tp.rank_timeout") and removes
  // the rendezvous directory.
  void finish(runtime::Model& model);
  // On an error: stops the children that still run and removes the directory.
  ~TpLaunch();
  TpLaunch(TpLaunch&&) noexcept;
  TpLaunch& operator=(TpLaunch&&) = delete;

  bool launched() const { return children_ != nullptr; }

 private:
  TpLaunch() = default;
  std::filesystem::path dir_;
  std::unique_ptr<RankProcesses> children_;
  std::unique_ptr<SignalCleanup> interrupt_cleanup_;  // Ctrl-C: stop the children, remove dir_
};

// The children's command line: `argv` less --tp-procs (and --tp-procs=...), MODEL (`model_dir`)
// replaced by `model_arg` when that is not empty, plus --tp-rank `rank` --rendezvous `dir`.
std::vector<std::string> child_argv(const std::vector<std::string>& argv, int rank, const std::filesystem::path& dir,
                                    const std::string& model_dir, const std::filesystem::path& model_arg);

// This process's command line (/proc/self/cmdline).
std::vector<std::string> own_argv();

// Whether this process prints the command's results: rank 0, or not part of a multi-process group.
bool prints_results(const ModelCliOptions& cli);

// Runs a command's body; a joined rank other than 0 prefixes its errors with "tensor-parallel rank
// R of N: ", so that its message is told apart from rank 0's on the shared terminal.
void run_as_rank(const ModelCliOptions& cli, const std::function<void()>& body);

}  // namespace qlm::cli
