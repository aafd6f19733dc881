// Options shared by the subcommands that load and run a model (generate, logits): device,
// threads, tensor parallelism, kernel backend, quantization override and plugins, KV-cache dtype,
// activation dtype (CUDA).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
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
  std::string kv_dtype = "auto";  // --kv-cache-dtype, parsed by parse_kv_cache_dtype
  std::string dtype;  // activation dtype; empty: the device's default (f32 on cpu, bf16 on cuda)
  std::string cuda_graph = "on";  // --cuda-graph on|off: single-token decode steps as one CUDA graph
  // Multi-process tensor parallelism on CUDA (tools/qlm/tp_launch.h): --tp-procs launches the
  // other ranks; --tp-rank R with --rendezvous DIR joins a group as rank R; --tp-gpu picks its GPU.
  bool tp_procs = false;
  std::optional<int> tp_rank;
  std::string rendezvous;
  std::optional<int> tp_gpu;
  double rendezvous_timeout_s = 600;
  double stall_timeout_s = 300;  // --tp-stall-timeout: a multi-process rank's step that takes longer ends it
};

// Adds MODEL (positional, required) and the options above to `cmd`.
void add_model_options(CLI::App* cmd, ModelCliOptions& options);
// Throws "cli.device" / "cli.dtype" / "config.kv_cache_dtype" for values it cannot parse,
// "model.act_dtype" for an activation dtype the device cannot run (bf16 / f16 on cpu), and "cli.tp"
// for tensor-parallel options that do not go together (validate_tp_options).
runtime::ModelOptions to_model_options(const ModelCliOptions& options);
// "cli.tp" for --tp-procs / --tp-rank / --rendezvous / --tp-gpu combinations that cannot work.
void validate_tp_options(const ModelCliOptions& options);

}  // namespace qlm::cli
