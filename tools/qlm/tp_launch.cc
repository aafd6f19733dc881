#include "tools/qlm/tp_launch.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "cuda/device.h"
#include "parallel/nccl_comm.h"
#include "parallel/rendezvous.h"

namespace qlm::cli {

namespace fs = std::filesystem;

std::vector<std::string> own_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.empty())
    fail("tp.launch", {.file = "/proc/self/cmdline", .tensor = {}, .layer = {}},
         "start the ranks yourself with --tp-rank R --rendezvous DIR", "cannot read this process's command line");
  std::vector<std::string> argv;
  size_t begin = 0;
  while (begin < raw.size()) {
    size_t end = raw.find('\0', begin);
    if (end == std::string::npos) end = raw.size();
    argv.push_back(raw.substr(begin, end - begin));
    begin = end + 1;
  }
  return argv;
}

std::vector<std::string> child_argv(const std::vector<std::string>& argv, int rank, const fs::path& dir,
                                    const std::string& model_dir, const fs::path& model_arg) {
  std::vector<std::string> out;
  bool model_replaced = model_arg.empty();
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (i > 0 && (a == "--tp-procs" || a.rfind("--tp-procs=", 0) == 0)) continue;
    if (i > 0 && !model_replaced && a == model_dir) {
      out.push_back(model_arg.string());
      model_replaced = true;
      continue;
    }
    out.push_back(a);
  }
  out.insert(out.end(), {"--tp-rank", std::to_string(rank), "--rendezvous", dir.string()});
  return out;
}

bool prints_results(const ModelCliOptions& cli) { return !cli.tp_rank || *cli.tp_rank == 0; }

void run_as_rank(const ModelCliOptions& cli, const std::function<void()>& body) {
  // Rank 0 speaks for the group, and a rank outside the group is an argument error of its own.
  if (!cli.tp_rank || *cli.tp_rank <= 0 || *cli.tp_rank >= cli.tp) return body();
  try {
    body();
  } catch (const Error& e) {
    const std::string prefix = fmt::format("tensor-parallel rank {}", *cli.tp_rank);
    if (e.message().rfind(prefix, 0) == 0) throw;  // already says which rank
    throw Error(e.code(), fmt::format("{} of {}: {}", prefix, cli.tp, e.message()), e.context(), e.remedy());
  }
}

TpLaunch TpLaunch::start(const ModelCliOptions& cli, runtime::ModelOptions& options, const fs::path& model_arg) {
  TpLaunch launch;
  if (!cli.tp_procs) return launch;
  // Fail here, before any child starts, for what every rank would fail on.
  if (!cuda_backend_built())
    fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
         "--tp-procs runs one process per GPU but this qlm was built without the CUDA backend");
  if (!nccl_available())
    fail("model.tp", {}, "rebuild with NCCL installed, or use --tp 1",
         "--tp-procs needs NCCL, which this qlm was built without");
  const size_t visible = cuda_devices().size();
  if (visible < static_cast<size_t>(cli.tp))
    fail("model.tp", {},
         visible == 0 ? std::string("check the driver and that the GPUs are visible (nvidia-smi, CUDA_VISIBLE_DEVICES)")
                      : fmt::format("use --tp {} or less on this machine, or start ranks on several hosts with "
                                    "--tp-rank and --rendezvous",
                                    visible),
         "--tp {} --tp-procs needs one GPU per rank but {} CUDA device(s) are visible", cli.tp, visible);

  std::string pattern = (fs::temp_directory_path() / "qlm-tp-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    fail("tp.launch", {.file = pattern, .tensor = {}, .layer = {}}, "set TMPDIR to a writable directory",
         "cannot create the rendezvous directory");
  launch.dir_ = pattern;
  const std::vector<std::string> argv = own_argv();
  launch.children_ = RankProcesses::spawn("/proc/self/exe", cli.tp, [&](int rank) {
    return child_argv(argv, rank, launch.dir_, cli.model_dir, model_arg);
  });
  // Ctrl-C (or SIGTERM / SIGHUP) from here on stops the children and removes the directory: every
  // file a rank may write there is named in advance (rendezvous.h; temporaries end in .tmp.<pid>).
  std::vector<pid_t> pids = launch.children_->pids();
  std::vector<std::string> files = {kRendezvousIdFile, fmt::format("{}.tmp.{}", kRendezvousIdFile, ::getpid())};
  for (int r = 0; r < cli.tp; ++r) {
    const pid_t pid = r == 0 ? ::getpid() : pids[static_cast<size_t>(r - 1)];
    files.push_back(rendezvous_rank_file(r));
    files.push_back(fmt::format("{}.tmp.{}", rendezvous_rank_file(r), pid));
  }
  launch.interrupt_cleanup_ = std::make_unique<SignalCleanup>(launch.dir_, files, pids);
  const fs::path dir = launch.dir_;
  launch.children_->set_fatal(true, [dir] {
    std::error_code ec;
    fs::remove_all(dir, ec);
  });
  options.tp_rank = 0;
  options.rendezvous = launch.dir_;
  RankProcesses* children = launch.children_.get();
  options.rendezvous_poll = [children] { children->check(/*exit_is_failure=*/true); };
  return launch;
}

void TpLaunch::finish(runtime::Model& model) {
  model.leave_group();  // the children are still watched: one that dies here ends this process
  if (!children_) return;
  children_->set_fatal(false);
  // Every rank ran the same collectives, so the children are at most finishing their own output.
  children_->wait(std::chrono::seconds(120));
  interrupt_cleanup_.reset();
  children_.reset();
  std::error_code ec;
  fs::remove_all(dir_, ec);
  dir_.clear();
}

TpLaunch::TpLaunch(TpLaunch&& other) noexcept
    : dir_(std::move(other.dir_)),
      children_(std::move(other.children_)),
      interrupt_cleanup_(std::move(other.interrupt_cleanup_)) {
  other.dir_.clear();
}

TpLaunch::~TpLaunch() {
  interrupt_cleanup_.reset();
  if (children_) {
    children_->set_fatal(false);
    children_.reset();  // stops and reaps the children
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

}  // namespace qlm::cli
