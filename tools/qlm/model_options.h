// Options shared by the subcommands that load and run a model (generate, logits): device,
// threads, tensor parallelism, kernel backend, quantization override and plugins, KV-cache dtype.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "runtime/model.h"

namespace qlm::cli {

struct ModelCliOptions {
  std::string model_dir;
  std::string device = "cpu";
  int threads = 0;
  int tp = 1;
  std::string linear_backend = "auto";
  std::vector<std::string> quant_plugins;
  std::string quantization;
  std::string kv_dtype = "f32";
};

// Adds MODEL (positional, required) and the options above to `cmd`.
void add_model_options(CLI::App* cmd, ModelCliOptions& options);
// Throws "cli.device" / "cli.kv_dtype" for values it cannot parse.
runtime::ModelOptions to_model_options(const ModelCliOptions& options);

}  // namespace qlm::cli
