// `qlm bench-decode`: decode speed of a whole model, the number users compare engines by.
//   qlm bench-decode MODEL [model options: --device, --dtype, --threads, --tp, ...]
//                    [--prompt-len P] [--tokens T] [--json]
// MODEL is a model directory, or `synthetic:llama3-8b` / `synthetic:llama3-70b` / `synthetic:qwen3-30b-a3b`
// (each with optional `:layers=N` and `:format=gptq|fp8|int8`): an int4 GPTQ checkpoint (g128, lm_head quantized; the
// default) or a compressed-tensors FP8- or INT8-dynamic one (lm_head F16) with random weights in that shape, written to
// a temporary directory under --tmp (default: the system temp dir), loaded, and removed
// (~4.9 GB for 8B; 70B is ~0.43 GB per layer and the Qwen3-MoE shape ~0.32 GB, so `:layers=N` keeps them to N).
// `--keep-synthetic DIR` writes it to DIR instead and keeps it; a later run given the same DIR and model loads it
// without writing again (A/B runs of one shape under different settings). Runs a prefill of P tokens, then T
// single-token decode steps as `qlm generate` runs them greedily (Model::decode_greedy: queued on the GPU, each
// choosing its successor there; elsewhere each returns the logits to the host), all complete when timed. Reports
// tokens/s and the linear-layer weight bytes each step reads; bytes x tokens/s is the bandwidth the decode reaches, to
// put beside the device's.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/synthetic_checkpoint.h"
#include "core/error.h"
#include "parallel/signal_cleanup.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/model_options.h"
#include "tools/qlm/tp_launch.h"

namespace qlm::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchDecodeOptions {
  ModelCliOptions model;
  int64_t prompt_len = 16;
  int64_t tokens = 64;
  std::string tmp;
  std::string keep_synthetic;
  bool json = false;
};

// "synthetic:llama3-8b", "synthetic:llama3-70b:layers=8", "synthetic:llama3-8b:format=fp8:layers=4" -> a shape;
// nullopt for a directory.
std::optional<bench::SyntheticShape> synthetic_shape(const std::string& spec) {
  const std::string prefix = "synthetic:";
  if (spec.rfind(prefix, 0) != 0) return std::nullopt;
  // The model, then its options, ':'-separated (an empty one is refused as an unknown option).
  std::vector<std::string> parts;
  const std::string rest = spec.substr(prefix.size());
  for (size_t b = 0;;) {
    const size_t e = rest.find(':', b);
    parts.push_back(rest.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  bench::SyntheticShape s;  // Llama-3-8B
  if (parts[0] == "qwen3-30b-a3b") {
    s = bench::synthetic_qwen3_30b_a3b();
  } else if (parts[0] == "llama3-70b") {
    s.hidden = 8192;
    s.intermediate = 28672;
    s.layers = 80;
    s.heads = 64;
    s.kv_heads = 8;
  } else if (parts[0] != "llama3-8b") {
    fail("cli.args", {}, "use synthetic:llama3-8b, synthetic:llama3-70b or synthetic:qwen3-30b-a3b",
         "unknown synthetic model '{}'", parts[0]);
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& opt = parts[i];
    if (opt.rfind("layers=", 0) == 0) {
      int64_t layers = 0;
      try {
        layers = std::stoll(opt.substr(7));
      } catch (const std::exception&) {
      }
      if (layers <= 0) fail("cli.args", {}, "use a positive layer count", "bad layer count in '{}'", spec);
      s.layers = layers;
    } else if (opt == "format=gptq") {
      s.format = bench::SyntheticFormat::Gptq4;
    } else if (opt == "format=fp8") {
      s.format = bench::SyntheticFormat::Fp8Dynamic;
    } else if (opt == "format=int8") {
      s.format = bench::SyntheticFormat::Int8Dynamic;
    } else {
      fail("cli.args", {}, "use :layers=N and :format=gptq|fp8|int8, e.g. synthetic:llama3-70b:format=fp8:layers=8",
           "unknown synthetic option '{}' in '{}'", opt, spec);
    }
  }
  return s;
}

// Removes the synthetic checkpoint when the run ends (the weights are in memory by then).
struct TempDir {
  fs::path dir;
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

void bench_decode(const BenchDecodeOptions& o) {
  if (o.prompt_len <= 0 || o.tokens <= 0)
    fail("cli.args", {}, "", "--prompt-len and --tokens must be positive (got {}, {})", o.prompt_len, o.tokens);
  runtime::ModelOptions options = to_model_options(o.model);
  fs::path dir = o.model.model_dir;
  TempDir temp;
  std::unique_ptr<SignalCleanup> synthetic_cleanup;
  double write_s = 0;
  const std::optional<bench::SyntheticShape> shape = synthetic_shape(o.model.model_dir);
  if (!shape && !o.keep_synthetic.empty())
    fail("cli.args", {}, "give a synthetic:... model, or leave out --keep-synthetic",
         "--keep-synthetic applies to synthetic models, not to '{}'", o.model.model_dir);
  if (shape && !o.keep_synthetic.empty()) {
    // The marker names the model and is written last, so a checkpoint cut short is never reused.
    dir = o.keep_synthetic;
    const fs::path marker = dir / ".qlm-synthetic";
    std::string written;
    if (std::ifstream in(marker); in) std::getline(in, written);
    if (written == o.model.model_dir) {
      std::fprintf(stderr, "reusing the synthetic %s checkpoint in %s\n", o.model.model_dir.c_str(), dir.c_str());
    } else {
      fs::create_directories(dir);
      fs::remove(marker);
      std::fprintf(stderr, "writing a synthetic %s checkpoint (%lld layers) to %s (kept) ...\n",
                   o.model.model_dir.c_str(), static_cast<long long>(shape->layers), dir.c_str());
      const auto t0 = Clock::now();
      bench::write_synthetic_checkpoint(dir, *shape);
      write_s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::ofstream(marker) << o.model.model_dir << "\n";
    }
  } else if (shape) {
    temp.dir =
        (o.tmp.empty() ? fs::temp_directory_path() : fs::path(o.tmp)) / ("qlm-synthetic-" + std::to_string(::getpid()));
    dir = temp.dir;
    // Ctrl-C while it is written or loaded removes it (several GB); it goes for good after the load.
    fs::create_directories(dir);
    synthetic_cleanup =
        std::make_unique<SignalCleanup>(dir, bench::synthetic_checkpoint_files(*shape), std::vector<pid_t>{});
    std::fprintf(stderr, "writing a synthetic %s checkpoint (%lld layers) to %s ...\n", o.model.model_dir.c_str(),
                 static_cast<long long>(shape->layers), dir.c_str());
    const auto t0 = Clock::now();
    bench::write_synthetic_checkpoint(dir, *shape);
    write_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // --tp-procs: the children load the checkpoint rank 0 just wrote (MODEL is replaced by its path).
  TpLaunch launch = TpLaunch::start(o.model, options, shape ? dir : fs::path{});
  auto model = runtime::Model::load(dir, options);
  // Every rank has mapped the checkpoint once rank 0's load returns (they open it before meeting).
  std::error_code ec;
  if (!temp.dir.empty()) fs::remove_all(temp.dir, ec);
  synthetic_cleanup.reset();

  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_len));
  for (int64_t i = 0; i < o.prompt_len; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % model->vocab_size());
  // The decode loop `qlm generate` runs greedily: the steps queued on the device, each choosing the next token there
  // (Model::decode_greedy), where the model can; otherwise each step returns its logits to the host, which picks the
  // next input (a fixed sequence of ids: any id costs the same).
  const auto decode = [&] {
    const auto all = [](int32_t) { return true; };
    if (model->decode_greedy(1, o.tokens, all)) return true;
    int32_t next = 1;
    for (int64_t t = 0; t < o.tokens; ++t) {
      const int32_t one[1] = {next};
      const Tensor logits = model->forward(one, false);
      next = static_cast<int32_t>((next * 31 + 7 + static_cast<int32_t>(logits.numel() > 0)) % model->vocab_size());
    }
    return false;
  };
  // Warm-up, the whole run once: kernels' first-call setup, the KV cache grown to its final size
  // and (CUDA) the decode step captured as a graph at that size, so none of it is timed.
  model->forward(prompt, false);
  decode();
  model->reset();
  const auto p0 = Clock::now();
  model->forward(prompt, false);
  const double prefill_s = std::chrono::duration<double>(Clock::now() - p0).count();
  const auto d0 = Clock::now();
  const bool on_device = decode();
  const double decode_s = std::chrono::duration<double>(Clock::now() - d0).count();
  const double tok_s = static_cast<double>(o.tokens) / decode_s;
  const double bytes = static_cast<double>(model->linear_weight_bytes());
  launch.finish(*model);
  if (!prints_results(o.model)) return;  // rank 0 of a multi-process group reports

  nlohmann::ordered_json j;
  j["model"] = o.model.model_dir;
  j["device"] = options.device.str();
  j["act_dtype"] = dtype_name(model->act_dtype());
  j["tp"] = model->tp();
  j["tp_procs"] = model->joined_group();
  j["kernels"] = model->plan().summary();
  if (!model->decode_graph_status().empty()) j["decode_step"] = model->decode_graph_status();
  if (const std::string router = model->moe_router_status(); !router.empty()) j["moe_router"] = router;
  j["decode_loop"] =
      on_device ? "greedy on the device, steps queued ahead of the host" : "host: each step's logits to the host";
  j["load_s"] = model->load_seconds();
  if (write_s > 0) j["synthetic_write_s"] = write_s;
  j["prompt_len"] = o.prompt_len;
  j["prefill_tok_s"] = static_cast<double>(o.prompt_len) / prefill_s;
  j["decode_tokens"] = o.tokens;
  j["decode_tok_s"] = tok_s;
  j["decode_ms_per_token"] = 1e3 / tok_s;
  j["weight_bytes_per_token"] = bytes;
  j["weight_gbps"] = bytes * tok_s * 1e-9;
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    fmt::print(
        "{} on {} ({}): load {:.2f} s, prefill {} tokens {:.1f} tokens/s, decode {} tokens {:.2f} tokens/s "
        "({:.2f} ms/token), {:.2f} GB of linear weights per token = {:.1f} GB/s\nkernels: {}\n",
        o.model.model_dir, options.device.str(), dtype_name(model->act_dtype()), model->load_seconds(), o.prompt_len,
        j["prefill_tok_s"].get<double>(), o.tokens, tok_s, 1e3 / tok_s, bytes * 1e-9, bytes * tok_s * 1e-9,
        model->plan().summary());
    if (!model->decode_graph_status().empty()) fmt::print("decode step: {}\n", model->decode_graph_status());
    if (j.contains("moe_router")) fmt::print("MoE router at decode: {}\n", j["moe_router"].get<std::string>());
    fmt::print("decode loop: {}\n", j["decode_loop"].get<std::string>());
  }
}

}  // namespace

void register_bench_decode_command(CLI::App& app) {
  auto opts = std::make_shared<BenchDecodeOptions>();
  auto* cmd = app.add_subcommand(
      "bench-decode", "Decode tokens/s of a model (or a synthetic Llama-3- or Qwen3-MoE-shaped int4 / FP8 / INT8 one)");
  add_model_options(cmd, opts->model);
  cmd->add_option("--prompt-len", opts->prompt_len, "Prefill tokens before decoding")->capture_default_str();
  cmd->add_option("--tokens", opts->tokens, "Timed decode steps")->capture_default_str();
  cmd->add_option("--tmp", opts->tmp, "Parent directory of a synthetic checkpoint (default: system temp dir)");
  cmd->add_option("--keep-synthetic", opts->keep_synthetic,
                  "Write a synthetic checkpoint to DIR and keep it; reuse it when DIR already holds this model");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->callback([opts] { run_as_rank(opts->model, [&] { bench_decode(*opts); }); });
}

}  // namespace qlm::cli
