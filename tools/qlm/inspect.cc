// `qlm inspect MODEL_DIR [--json] [--verify-data]`: what a checkpoint is, what its quantization
// config says, and what its tensors actually are. Headers only unless --verify-data.
// `qlm inspect MODEL_DIR --plan [--json] [--tp N] [--device cpu|cuda] [--capability CC]
// [--linear-backend NAME] [--quantization NAME] [--dtype DT]`: the method and kernel of every linear layer of
// every rank, with each rejected kernel's reason, without reading weights (runtime/model_plan.h).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <unistd.h>

#include "core/error.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/inspect_plan.h"
#include "tools/qlm/inspect_report.h"
#include "tools/qlm/model_options.h"

namespace qlm::cli {
namespace {

struct InspectArgs {
  std::string model_dir;
  bool json = false;
  bool verify_data = false;
  bool plan = false;
  int capability = 0;
  ModelCliOptions model;  // --plan: device, tp, backend, quantization (model.model_dir unused)
};

void run_plan(const InspectArgs& args) {
  for (const auto& [flag, value] : {std::pair{"--verify-data", args.verify_data}})
    if (value) fail("cli.usage", {}, "run it without --plan", "{} cannot be combined with --plan", flag);
  runtime::ModelOptions options = to_model_options(args.model);
  if (args.capability != 0 && options.device.is_cpu())
    fail("cli.usage", {}, "add --device cuda", "--capability {} applies to --device cuda only", args.capability);
  const runtime::ModelPlan plan = runtime::plan_model(args.model_dir, options, args.capability);
  const nlohmann::ordered_json j = plan_json(args.model_dir, plan);
  const std::string text = args.json ? j.dump(2) + "\n" : render_plan_text(j);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void run_inspect(const InspectArgs& args) {
  if (args.plan) return run_plan(args);
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
  cmd->add_flag("--plan", args->plan,
                "Show the method and kernel of every linear layer of every rank, with each rejected kernel's reason "
                "(reads no weights)");
  ModelCliOptions& m = args->model;
  cmd->add_option("--device", m.device, "--plan: cpu or cuda[:N] (no GPU needed)")->default_str("cpu");
  cmd->add_option("--capability", args->capability, "--plan --device cuda: compute capability, e.g. 90 (default: the format's minimum)");
  cmd->add_option("--tp", m.tp, "--plan: tensor-parallel ranks")->default_str("1");
  cmd->add_option("--linear-backend", m.linear_backend, "--plan: kernel backend or kernel name for linear layers")
      ->default_str("auto");
  cmd->add_option("--quantization", m.quantization, "--plan: quantization format to use instead of the checkpoint's");
  cmd->add_option("--dtype", m.dtype, "--plan --device cuda: activation dtype bf16 (default), f16 or f32");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace qlm::cli
