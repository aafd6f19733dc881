#include "tools/qlm/model_options.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "core/error.h"

namespace qlm::cli {

void add_model_options(CLI::App* cmd, ModelCliOptions& o) {
  cmd->add_option("MODEL", o.model_dir, "Model directory (config.json + safetensors)")->required();
  cmd->add_option("--device", o.device, "cpu or cuda[:N]")->default_str("cpu");
  cmd->add_option("--threads", o.threads, "Compute threads (0: all cores)")->default_str("0");
  cmd->add_option("--tp", o.tp, "Tensor-parallel ranks (threads of this process, unless --tp-procs or --tp-rank)")
      ->default_str("1");
  cmd->add_option("--linear-backend", o.linear_backend, "Kernel backend or kernel name for linear layers")
      ->default_str("auto");
  cmd->add_option("--quant-plugin", o.quant_plugins, "Shared library registering quantization formats or kernels");
  cmd->add_option("--quantization", o.quantization, "Quantization format to use instead of the checkpoint's (same family)");
  cmd->add_option("--kv-cache-dtype", o.kv_dtype,
                  "KV-cache storage: auto (the activation dtype), f32, f16, bf16, fp8 (= fp8_e4m3), fp8_e4m3 or fp8_e5m2")
      ->default_str("auto");
  cmd->add_option("--dtype", o.dtype, "Activation dtype on cuda: bf16 (default), f16 or f32; cpu runs f32 only");
  cmd->add_option("--cuda-graph", o.cuda_graph,
                  "On cuda: run each single-token decode step as one captured CUDA graph (on) or launch every "
                  "kernel (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("on");
  cmd->add_flag("--tp-procs", o.tp_procs,
                "With --device cuda --tp N: run ranks 1..N-1 as child processes (one per GPU) instead of threads");
  cmd->add_option("--tp-rank", o.tp_rank, "Join a multi-process --tp group as this rank (needs --rendezvous)");
  cmd->add_option("--rendezvous", o.rendezvous,
                  "With --tp-rank: where the ranks meet: a fresh directory every rank can reach, or tcp://HOST:PORT (rank 0 listens)");
  cmd->add_option("--rendezvous-timeout", o.rendezvous_timeout_s,
                  "Seconds to wait at the rendezvous for every rank (each arrives once loaded)")
      ->default_str("600");
  cmd->add_option("--tp-stall-timeout", o.stall_timeout_s,
                  "Seconds a forward step of a multi-process rank may take before the rank gives up on a dead peer")
      ->default_str("300");
  cmd->add_option("--tp-gpu", o.tp_gpu,
                  "With --tp-rank: this rank's GPU (default: (N of --device cuda:N + rank) "
                  "mod the visible GPUs)");
}

void validate_tp_options(const ModelCliOptions& o) {
  const bool cpu = o.device == "cpu";
  if (o.tp_procs) {
    if (o.tp_rank)
      fail("cli.tp", {},
           "leave --tp-rank out with --tp-procs, or start every rank yourself with --tp-rank and --rendezvous",
           "--tp-procs makes this process rank 0 and starts the others, but --tp-rank {} was given", *o.tp_rank);
    if (o.tp < 2)
      fail("cli.tp", {}, "pass --tp N with N >= 2 (one process per GPU)",
           "--tp-procs needs --tp 2 or more, got --tp {}", o.tp);
    if (cpu)
      fail("cli.tp", {},
           "use --device cuda with --tp-procs; on the CPU --tp N runs its ranks as threads of one process",
           "--tp-procs runs one process per GPU over NCCL, but the device is cpu");
    if (!o.rendezvous.empty())
      fail("cli.tp", {}, "leave --rendezvous out: --tp-procs makes a fresh directory and removes it at the end",
           "--tp-procs chooses its own rendezvous, but --rendezvous {} was given", o.rendezvous);
    if (o.tp_gpu)
      fail("cli.tp", {}, "choose the first GPU with --device cuda:N (rank r runs on cuda:N+r)",
           "--tp-gpu sets one joined rank's GPU and does not go with --tp-procs");
  }
  if (o.tp_rank) {
    if (o.tp < 2)
      fail("cli.tp", {}, "pass the group's size with --tp N (N >= 2) on every rank",
           "--tp-rank {} joins a tensor-parallel group, but --tp is {}", *o.tp_rank, o.tp);
    if (*o.tp_rank < 0 || *o.tp_rank >= o.tp)
      fail("cli.tp", {}, fmt::format("use --tp-rank 0 .. {} (one process per rank)", o.tp - 1),
           "--tp-rank {} is outside the group of --tp {}", *o.tp_rank, o.tp);
    if (cpu)
      fail("cli.tp", {}, "use --device cuda; on the CPU --tp N runs every rank as a thread of one process",
           "--tp-rank joins a multi-process group over NCCL, but the device is cpu");
    if (o.rendezvous.empty())
      fail("cli.tp", {}, "pass --rendezvous DIR (the same fresh directory on every rank) or tcp://HOST:PORT",
           "--tp-rank {} needs --rendezvous to meet the other ranks", *o.tp_rank);
  } else if (!o.tp_procs) {
    if (!o.rendezvous.empty())
      fail("cli.tp", {}, "add --tp-rank R (and --tp N) to join a group, or leave --rendezvous out",
           "--rendezvous is used only by a rank joining with --tp-rank");
    if (o.tp_gpu)
      fail("cli.tp", {}, "add --tp-rank R (and --tp N, --rendezvous DIR), or use --device cuda:N for one GPU",
           "--tp-gpu sets the GPU of a rank joining with --tp-rank");
  }
  if (!(o.rendezvous_timeout_s > 0))
    fail("cli.tp", {}, "pass a positive number of seconds", "--rendezvous-timeout {} is not positive",
         o.rendezvous_timeout_s);
  if (!(o.stall_timeout_s > 0))
    fail("cli.tp", {}, "pass a positive number of seconds", "--tp-stall-timeout {} is not positive",
         o.stall_timeout_s);
}

namespace {
Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* begin = text.data() + 5;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && index >= 0) return Device::cuda(index);
  }
  fail("cli.device", {}, "use --device cpu or --device cuda[:N]", "unknown device '{}'", text);
}

DType parse_act_dtype(const std::string& text) {
  if (text == "bf16" || text == "bfloat16") return DType::BF16;
  if (text == "f16" || text == "fp16" || text == "float16") return DType::F16;
  if (text == "f32" || text == "fp32" || text == "float32") return DType::F32;
  fail("cli.dtype", {}, "use --dtype bf16, f16 or f32", "unknown activation dtype '{}'", text);
}
}  // namespace

runtime::ModelOptions to_model_options(const ModelCliOptions& o) {
  validate_tp_options(o);
  runtime::ModelOptions m;
  m.device = parse_device(o.device);
  m.threads = o.threads;
  m.tp = o.tp;
  m.kernels.linear_backend = o.linear_backend;
  m.quant_plugins = o.quant_plugins;
  if (!o.quantization.empty()) m.quantization = o.quantization;
  m.kv_cache_dtype = parse_kv_cache_dtype(o.kv_dtype);
  if (!o.dtype.empty()) m.act_dtype = parse_act_dtype(o.dtype);
  m.cuda_graph = o.cuda_graph == "on";
  m.tp_rank = o.tp_rank;
  m.rendezvous = o.rendezvous;
  m.rendezvous_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.rendezvous_timeout_s * 1000));
  m.tp_gpu = o.tp_gpu;
  if (o.tp_rank || o.tp_procs) {
    m.stall_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.stall_timeout_s * 1000));
    const int rank = o.tp_rank.value_or(0), size = o.tp;
    const bool launcher = o.tp_procs;
    m.on_stall = [rank, size, launcher](double seconds) {
      std::fprintf(stderr,
                   "qlm: error: [tp.stalled] tensor-parallel rank %d of %d: a step has not finished after %.0f s; "
                   "another rank has most likely died (its output says why) and NCCL would wait for it for ever "
                   "(remedy: check the other ranks; --tp-stall-timeout S waits longer)\n",
                   rank, size, seconds);
      // The launcher ends through its interrupt cleanup (children stopped, rendezvous directory removed).
      if (launcher) ::raise(SIGTERM);
      ::_exit(1);
    };
  }
  runtime::activation_dtype(m);  // rejects bf16 / f16 on cpu before anything loads
  return m;
}

}  // namespace qlm::cli
