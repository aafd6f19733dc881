// Subcommand registration. A subcommand file defines one `register_<name>_command(CLI::App&)` and
// adds one line to register_all_commands (commands.cc). Handlers run inside app.parse via
// callbacks and throw qlm::Error on failure.
#pragma once

#include <CLI/CLI.hpp>

namespace qlm::cli {

void register_all_commands(CLI::App& app);

void register_version_command(CLI::App& app);
void register_inspect_command(CLI::App& app);  // inspect.cc
void register_bench_linear_command(CLI::App& app);  // bench_linear.cc
void register_generate_command(CLI::App& app);  // generate.cc
void register_logits_command(CLI::App& app);  // logits.cc
void register_quantize_command(CLI::App& app);  // quantize.cc
void register_bench_decode_command(CLI::App& app);  // bench_decode.cc
void register_bench_moe_command(CLI::App& app);  // bench_moe.cc
void register_bench_attention_command(CLI::App& app);  // bench_attention.cc

}  // namespace qlm::cli
