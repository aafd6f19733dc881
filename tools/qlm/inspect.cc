// `qlm inspect MODEL_DIR [--json] [--verify-data]`: what a checkpoint is, what its quantization
// config says, and what its tensors actually are. Headers only unless --verify-data.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <unistd.h>

#include "core/error.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/inspect_report.h"

namespace qlm::cli {
namespace {

struct InspectArgs {
  std::string model_dir;
  bool json = false;
  bool verify_data = false;
};

void run_inspect(const InspectArgs& args) {
  InspectOptions options;
  options.model_dir = args.model_dir;
  options.verify_data = args.verify_data;
  options.progress = ::isatty(STDERR_FILENO) != 0;
  const nlohmann::ordered_json report = build_inspect_report(options);
  const std::string text = args.json ? report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n"
                                     : render_inspect_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (const size_t n = report["errors"].size(); n > 0)
    fail("inspect.failed", {}, "", "{} error{} found in {} (listed above)", n, n == 1 ? "" : "s", args.model_dir);
}

}  // namespace

void register_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Describe a model directory: config, quantization, tensors, warnings");
  cmd->add_option("MODEL_DIR", args->model_dir, "Directory with config.json and safetensors")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->add_flag("--verify-data", args->verify_data, "Read and checksum every tensor byte; report throughput");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace qlm::cli
