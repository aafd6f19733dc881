#include "tools/qlm/commands.h"

#include <cstdio>

namespace qlm::cli {

void register_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the qlm version");
  cmd->callback([] { std::printf("qlm 0.1.0\n"); });
}

void register_all_commands(CLI::App& app) {
  register_version_command(app);
  register_inspect_command(app);
  register_bench_linear_command(app);
  register_generate_command(app);
  register_logits_command(app);
  register_quantize_command(app);
  register_bench_decode_command(app);
  register_bench_moe_command(app);
  register_bench_attention_command(app);
}

}  // namespace qlm::cli
