// `qlm bench-linear`: times one linear layer's kernel on random weights.
//   qlm bench-linear --format {fp32,bf16,awq,gptq,ct,fp8,int8} --bits B --group G [--asym] [--act-order]
//                    --k K --n N --m M [--device cpu|cuda] [--dtype f32|bf16|f16] [--kernel NAME]
//                    [--threads T] [--iters I] [--rotate R] [--calls C] [--json]
// The contract of the JSON object (one line) is fixed: median_us, min_us, gflops (2*M*N*K / median),
// weight_gbps (prepared weight bytes / median), kernel, m, k, n, bits, group, format, threads, plus extras.
// Successive calls cycle through --rotate copies of the layer (default: enough for 128 MiB, four
// times the L3 of the reference machine; 512 MiB on CUDA, many times an H200's L2) so that weights
// stream from memory, as in a real model. On CUDA one timed iteration runs every copy once and
// reports the mean per call: replayed from a CUDA graph (--timing graph, the default: device time
// without host launch overhead) or launched between two events (--timing events: launch gaps
// included, as in an eager model step); activations are --dtype (bf16 by default). --calls C makes a timed
// iteration C calls instead, cycling through the copies (with --rotate 1: C calls back to back on one copy whose
// weights fit the GPU's L2, the kernel's time without the DRAM stream).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "cuda/timing.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/random_weights.h"
#include "kernels/cpu/scaled_mm_random.h"
#include "kernels/dense_linear.h"
#include "kernels/mp_linear.h"
#include "kernels/scaled_mm.h"
#include "tools/qlm/commands.h"

namespace qlm::cli {
namespace {

struct BenchLinearOptions {
  std::string format = "gptq";
  int bits = 4;
  int64_t group = 128;
  bool asym = false;
  bool act_order = false;
  int64_t k = 4096, n = 4096, m = 1;
  std::vector<int64_t> ms{1};  // --m: one value, or a comma list timed on the same prepared weights
  std::string device = "cpu";
  std::string dtype = "auto";  // activations: f32 on cpu, bf16 on cuda by default
  std::string timing = "graph";  // cuda: graph | events
  std::string kernel = "auto";
  int threads = 0;
  int iters = 20;
  int rotate = 0;  // 0: auto
  int calls = 0;   // CUDA: calls per timed iteration, cycling through the copies (0: one per copy)
  bool json = false;
};

// Copies of one layer's kernel: run(i, x, y) runs copy i.
struct Prepared {
  std::string kernel;
  size_t weight_bytes = 0;  // of one copy
  int copies = 1;
  std::function<void(int, const Tensor&, Tensor&)> run;
  std::function<std::string(int64_t M)> path = [](int64_t) { return std::string(); };  // the kernel's path for M
};

// Where the kernel runs and on what activations.
struct Target {
  Device device;
  int capability = 0;
  DType act = DType::F32;
};

Target target_of(const BenchLinearOptions& o) {
  if (o.device == "cpu") return {Device::cpu(), 0, DType::F32};
  const DType act = o.dtype == "f32" ? DType::F32 : o.dtype == "f16" ? DType::F16 : DType::BF16;
  return {Device::cuda(0), cuda_capability(0), act};
}

int copies_for(const BenchLinearOptions& o, size_t bytes_per_copy) {
  if (o.rotate > 0) return o.rotate;
  const bool gpu = o.device != "cpu";
  const size_t target = gpu ? size_t{512} << 20 : size_t{128} << 20;
  const size_t most = gpu ? 64 : 16;
  return static_cast<int>(std::clamp<size_t>((target + bytes_per_copy - 1) / std::max<size_t>(bytes_per_copy, 1), 1, most));
}

Prepared prepare_dense(const BenchLinearOptions& o) {
  DenseLinearConfig cfg;
  cfg.K_p = o.k;
  cfg.N_p = o.n;
  cfg.weight_dtype = o.format == "bf16" ? DType::BF16 : DType::F32;
  const Target t = target_of(o);
  cfg.act_dtype = t.act;
  cfg.device = t.device;
  cfg.capability = t.capability;
  auto [entry, sel] = DenseKernelRegistry::instance().select(cfg, t.device.type, o.kernel, "dense linear", "bench");
  const Tensor weight = random_float_tensor(o.n, o.k, cfg.weight_dtype, 7);
  auto kernels = std::make_shared<std::vector<std::unique_ptr<DenseLinearKernel>>>();
  kernels->push_back(entry->create(cfg));
  kernels->back()->prepare(weight);
  const int copies = copies_for(o, kernels->back()->weight_bytes());
  while (static_cast<int>(kernels->size()) < copies) {
    kernels->push_back(entry->create(cfg));
    kernels->back()->prepare(weight);
  }
  return {kernels->front()->name(), kernels->front()->weight_bytes(), copies,
          [kernels](int i, const Tensor& x, Tensor& y) { (*kernels)[i]->run(x, y, nullptr); }};
}

Prepared prepare_wna16(const BenchLinearOptions& o) {
  if (o.format == "awq" && o.bits != 4)
    fail("cli.args", {}, "use --bits 4", "AWQ checkpoints are 4-bit; --bits {} is not an AWQ format", o.bits);
  const bool zero_points = o.asym || o.format == "awq";
  RandomWna16Options w{.bits = o.bits, .K = o.k, .N = o.n, .group_size = o.group, .zero_points = zero_points,
                       .act_order = o.act_order, .seed = 7};
  WNA16Weights weights = random_wna16_weights(w);
  MPLinearLayerConfig cfg;
  cfg.K = cfg.K_p = o.k;
  cfg.N = cfg.N_p = o.n;
  cfg.weight_type = weights.weight_type;
  cfg.zero_points = zero_points;
  cfg.has_g_idx = o.act_order;
  cfg.group_size = o.group;
  const Target t = target_of(o);
  cfg.act_dtype = t.act;
  cfg.device = t.device;
  cfg.capability = t.capability;
  auto [entry, sel] = MPKernelRegistry::instance().select(cfg, t.device.type, o.kernel, "mixed-precision linear", "bench");
  auto kernels = std::make_shared<std::vector<std::unique_ptr<MPLinearKernel>>>();
  kernels->push_back(entry->create(cfg));
  kernels->back()->prepare(weights);
  const int copies = copies_for(o, kernels->back()->weight_bytes());
  while (static_cast<int>(kernels->size()) < copies) {
    kernels->push_back(entry->create(cfg));
    kernels->back()->prepare(weights);
  }
  return {kernels->front()->name(), kernels->front()->weight_bytes(), copies,
          [kernels](int i, const Tensor& x, Tensor& y) { (*kernels)[i]->run(x, y, nullptr); },
          [kernels](int64_t M) { return kernels->front()->path(M); }};
}

// fp8 / int8 W8A8 (scaled-mm): dynamic per-token activations quantized inside the timed call.
Prepared prepare_scaled_mm(const BenchLinearOptions& o) {
  ScaledMMConfig cfg = bench_scaled_mm_config(o.format, o.k, o.n);
  const Target t = target_of(o);
  cfg.act_dtype = t.act;
  cfg.device = t.device;
  cfg.capability = t.capability;
  auto [entry, sel] = ScaledMMKernelRegistry::instance().select(cfg, t.device.type, o.kernel, "scaled-mm linear", "bench");
  const ScaledMMWeights weights = random_scaled_mm_weights(cfg, 7);
  auto kernels = std::make_shared<std::vector<std::unique_ptr<ScaledMMKernel>>>();
  do {
    kernels->push_back(entry->create(cfg));
    kernels->back()->prepare(weights);
  } while (static_cast<int>(kernels->size()) < copies_for(o, kernels->front()->weight_bytes()));
  return {kernels->front()->name(), kernels->front()->weight_bytes(), static_cast<int>(kernels->size()),
          [kernels](int i, const Tensor& x, Tensor& y) { (*kernels)[i]->run(x, y, nullptr); },
          [kernels](int64_t M) { return kernels->front()->path(M); }};
}

void check_options(const BenchLinearOptions& o) {
  if (o.device == "cuda") {
    if (!cuda_backend_built())
      fail("cli.no_cuda", {}, "rebuild with -DQLM_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu",
           "this qlm was built without CUDA, so --device cuda is unavailable");
    if (cuda_devices().empty())
      fail("cuda.unavailable", {}, "run on a machine with an NVIDIA GPU and its driver, or use --device cpu",
           "--device cuda: no CUDA device is visible");
  } else if (o.dtype != "auto" && o.dtype != "f32") {
    fail("cli.args", {}, "use --dtype f32 (or --device cuda)", "--dtype {} is for CUDA; CPU kernels take f32 activations",
         o.dtype);
  }
  if (o.k <= 0 || o.n <= 0) fail("cli.args", {}, "", "--k and --n must be positive (got {}, {})", o.k, o.n);
  for (int64_t m : o.ms)
    if (m <= 0) fail("cli.args", {}, "", "--m values must be positive (got {})", m);
  if (o.iters <= 0) fail("cli.args", {}, "", "--iters must be positive");
  if (o.rotate < 0) fail("cli.args", {}, "", "--rotate must be >= 0");
  if (o.calls < 0) fail("cli.args", {}, "", "--calls must be >= 0");
  if (o.calls > 0 && o.device == "cpu")
    fail("cli.args", {}, "leave --calls out on the CPU", "--calls is for CUDA timing");
  const bool quantized = o.format == "awq" || o.format == "gptq" || o.format == "ct";
  if (quantized) {
    if (o.bits != 2 && o.bits != 3 && o.bits != 4 && o.bits != 8)
      fail("cli.args", {}, "use --bits 2, 3, 4 or 8", "--bits {} is not a WNA16 width", o.bits);
    if (o.group != -1 && (o.group <= 0 || o.k % o.group != 0))
      fail("cli.args", {}, "use -1 (channelwise) or a group size dividing --k", "--group {} does not divide --k {}",
           o.group, o.k);
    if (o.act_order && o.group == -1) fail("cli.args", {}, "", "--act-order needs a group size");
  }
}

void time_one(const BenchLinearOptions& o, const Prepared& p) {
  const bool dense = o.format == "fp32" || o.format == "bf16";
  const bool w8a8 = o.format == "fp8" || o.format == "int8";

  const Target t = target_of(o);
  Tensor x = random_float_tensor(o.m, o.k, t.act, 11);
  Tensor y = Tensor::empty({o.m, o.n}, t.act);
  if (!t.device.is_cpu()) {
    x = x.to_device(t.device);
    y = Tensor::empty({o.m, o.n}, t.act, t.device);
  }
  for (int c = 0; c < p.copies; ++c) p.run(c, x, y);  // warm-up: page in weights and scratch
  // Process CPU time is not inflated by other processes taking the cores; with --threads 1 its
  // minimum is the undisturbed single-core time (with more threads it includes spin-waiting).
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  };
  std::vector<double> us;
  us.reserve(o.iters);
  double min_cpu_us = 1e300;
  std::string timing = o.timing;
  // One timed CUDA iteration: `calls` calls cycling through the copies (each copy once by default).
  const int calls = o.calls > 0 ? o.calls : p.copies;
  const auto batch = [&] {
    for (int c = 0; c < calls; ++c) p.run(c % p.copies, x, y);
  };
  if (!t.device.is_cpu() && timing == "graph") {
    try {
      for (double replay : cuda::time_graph_us(t.device.index, batch, o.iters)) us.push_back(replay / calls);
    } catch (const Error& e) {
      if (e.code() != "cuda.graph") throw;
      std::fprintf(stderr, "note: %s; timing with events\n", e.what());
      timing = "events";
    }
  }
  for (int i = 0; i < o.iters && us.size() < static_cast<size_t>(o.iters); ++i) {
    if (!t.device.is_cpu()) {
      us.push_back(cuda::time_device_us(t.device.index, batch) / calls);
      continue;
    }
    const double c0 = cpu_now();
    auto t0 = std::chrono::steady_clock::now();
    p.run(i % p.copies, x, y);
    auto t1 = std::chrono::steady_clock::now();
    min_cpu_us = std::min(min_cpu_us, cpu_now() - c0);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  const double median = us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
  const double gflops = 2.0 * o.m * o.n * o.k / (median * 1e3);
  const double gbps = p.weight_bytes / (median * 1e3);

  if (o.json) {
    nlohmann::ordered_json j;
    j["format"] = o.format;
    j["bits"] = dense ? (o.format == "bf16" ? 16 : 32) : w8a8 ? 8 : o.bits;
    j["group"] = dense || w8a8 ? 0 : o.group;
    j["asym"] = o.asym || o.format == "awq";
    j["act_order"] = o.act_order;
    j["m"] = o.m;
    j["k"] = o.k;
    j["n"] = o.n;
    j["device"] = o.device;
    j["act_dtype"] = dtype_name(t.act);
    if (!t.device.is_cpu()) j["timing"] = timing;
    j["kernel"] = p.kernel;
    if (const std::string path = p.path(o.m); !path.empty()) j["path"] = path;
    j["threads"] = compute_threads();
    j["iters"] = o.iters;
    j["copies"] = p.copies;
    if (!t.device.is_cpu()) j["calls"] = calls;
    j["median_us"] = median;
    j["min_us"] = us.front();
    if (t.device.is_cpu()) j["min_cpu_us"] = min_cpu_us;
    j["gflops"] = gflops;
    j["weight_gbps"] = gbps;
    j["weight_bytes"] = p.weight_bytes;
    if (t.device.is_cpu()) {
      j["cpu_features"] = cpu_features().describe();
    } else {
      const CudaDeviceInfo info = cuda_devices().at(static_cast<size_t>(t.device.index));
      j["gpu"] = info.name;
      j["capability"] = info.capability;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s %s bits=%d group=%lld m=%lld k=%lld n=%lld threads=%d: median %.1f us (min %.1f), %.1f GFLOP/s, "
                "%.2f GB/s of weights (%zu bytes)\n",
                p.kernel.c_str(), o.format.c_str(), o.bits, static_cast<long long>(o.group),
                static_cast<long long>(o.m), static_cast<long long>(o.k), static_cast<long long>(o.n),
                compute_threads(), median, us.front(), gflops, gbps, p.weight_bytes);
  }
  std::fflush(stdout);
}

void bench_linear(BenchLinearOptions o) {
  check_options(o);
  set_compute_threads(o.threads);
  const bool dense = o.format == "fp32" || o.format == "bf16";
  const bool w8a8 = o.format == "fp8" || o.format == "int8";
  const Prepared p = dense ? prepare_dense(o) : w8a8 ? prepare_scaled_mm(o) : prepare_wna16(o);
  for (int64_t m : o.ms) {
    o.m = m;
    time_one(o, p);
  }
}

}  // namespace

void register_bench_linear_command(CLI::App& app) {
  auto opts = std::make_shared<BenchLinearOptions>();
  auto* cmd = app.add_subcommand("bench-linear", "Time one linear layer's kernel on random weights");
  cmd->add_option("--format", opts->format, "Weight format")
      ->check(CLI::IsMember({"fp32", "bf16", "awq", "gptq", "ct", "fp8", "int8"}))
      ->capture_default_str();
  cmd->add_option("--bits", opts->bits, "Weight bits (quantized formats)")->capture_default_str();
  cmd->add_option("--group", opts->group, "Group size, -1 for channelwise")->capture_default_str();
  cmd->add_flag("--asym", opts->asym, "Zero points (uint<bits> with zeros)");
  cmd->add_flag("--act-order", opts->act_order, "Random act-order g_idx");
  cmd->add_option("--k", opts->k, "Input features")->capture_default_str();
  cmd->add_option("--n", opts->n, "Output features")->capture_default_str();
  cmd->add_option("--m", opts->ms, "Rows (tokens); a comma list times each on the same weights (one line each)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "Activation dtype (auto: f32 on cpu, bf16 on cuda)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--timing", opts->timing, "CUDA timing: graph (replayed CUDA graph) or events (eager launches)")
      ->check(CLI::IsMember({"graph", "events"}))
      ->capture_default_str();
  cmd->add_option("--kernel", opts->kernel, "Kernel or backend name (auto: the selector's choice)")->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Compute threads (0: all available cores)")->capture_default_str();
  cmd->add_option("--iters", opts->iters, "Timed iterations")->capture_default_str();
  cmd->add_option("--rotate", opts->rotate, "Copies of the layer cycled through (0: enough to exceed the caches)")
      ->capture_default_str();
  cmd->add_option("--calls", opts->calls,
                  "CUDA: calls per timed iteration, cycling through the copies (0: each copy once)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->callback([opts] { bench_linear(*opts); });
}

}  // namespace qlm::cli
