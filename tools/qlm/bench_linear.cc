// `qlm bench-linear`: times one linear layer's kernel on random weights.
//   qlm bench-linear --format {fp32,bf16,awq,gptq,ct,fp8,int8} --bits B --group G [--asym] [--act-order]
//                    --k K --n N --m M [--device cpu|cuda] [--kernel NAME] [--threads T] [--iters I] [--json]
// The contract of the JSON object (one line) is fixed: median_us, min_us, gflops (2*M*N*K / median),
// weight_gbps (prepared weight bytes / median), kernel, m, k, n, bits, group, format, threads, plus extras.
// Successive calls cycle through --rotate copies of the layer (default: enough for 128 MiB, four
// times the L3 of the reference machine) so that weights stream from memory, as in a real model.
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
  std::string device = "cpu";
  std::string kernel = "auto";
  int threads = 0;
  int iters = 20;
  int rotate = 0;  // 0: auto
  bool json = false;
};

// Copies of one layer's kernel: run(i, x, y) runs copy i.
struct Prepared {
  std::string kernel;
  size_t weight_bytes = 0;  // of one copy
  int copies = 1;
  std::function<void(int, const Tensor&, Tensor&)> run;
};

int copies_for(const BenchLinearOptions& o, size_t bytes_per_copy) {
  if (o.rotate > 0) return o.rotate;
  constexpr size_t kTarget = size_t{128} << 20;
  return static_cast<int>(std::clamp<size_t>((kTarget + bytes_per_copy - 1) / std::max<size_t>(bytes_per_copy, 1), 1, 16));
}

Prepared prepare_dense(const BenchLinearOptions& o) {
  DenseLinearConfig cfg;
  cfg.K_p = o.k;
  cfg.N_p = o.n;
  cfg.weight_dtype = o.format == "bf16" ? DType::BF16 : DType::F32;
  cfg.act_dtype = DType::F32;
  cfg.device = Device::cpu();
  auto [entry, sel] = DenseKernelRegistry::instance().select(cfg, DeviceType::CPU, o.kernel, "dense linear", "bench");
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
  cfg.act_dtype = DType::F32;
  cfg.device = Device::cpu();
  auto [entry, sel] = MPKernelRegistry::instance().select(cfg, DeviceType::CPU, o.kernel, "mixed-precision linear", "bench");
  auto kernels = std::make_shared<std::vector<std::unique_ptr<MPLinearKernel>>>();
  kernels->push_back(entry->create(cfg));
  kernels->back()->prepare(weights);
  const int copies = copies_for(o, kernels->back()->weight_bytes());
  while (static_cast<int>(kernels->size()) < copies) {
    kernels->push_back(entry->create(cfg));
    kernels->back()->prepare(weights);
  }
  return {kernels->front()->name(), kernels->front()->weight_bytes(), copies,
          [kernels](int i, const Tensor& x, Tensor& y) { (*kernels)[i]->run(x, y, nullptr); }};
}

// fp8 / int8 W8A8 (scaled-mm): dynamic per-token activations quantized inside the timed call.
Prepared prepare_scaled_mm(const BenchLinearOptions& o) {
  const ScaledMMConfig cfg = bench_scaled_mm_config(o.format, o.k, o.n);
  auto [entry, sel] = ScaledMMKernelRegistry::instance().select(cfg, DeviceType::CPU, o.kernel, "scaled-mm linear", "bench");
  const ScaledMMWeights weights = random_scaled_mm_weights(cfg, 7);
  auto kernels = std::make_shared<std::vector<std::unique_ptr<ScaledMMKernel>>>();
  do {
    kernels->push_back(entry->create(cfg));
    kernels->back()->prepare(weights);
  } while (static_cast<int>(kernels->size()) < copies_for(o, kernels->front()->weight_bytes()));
  return {kernels->front()->name(), kernels->front()->weight_bytes(), static_cast<int>(kernels->size()),
          [kernels](int i, const Tensor& x, Tensor& y) { (*kernels)[i]->run(x, y, nullptr); }};
}

void check_options(const BenchLinearOptions& o) {
  if (o.device == "cuda") {
#ifdef QLM_WITH_CUDA
    fail("cli.args", {}, "use --device cpu", "bench-linear does not time CUDA kernels yet");
#else
    fail("cli.no_cuda", {}, "rebuild with -DQLM_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu",
         "this qlm was built without CUDA, so --device cuda is unavailable");
#endif
  }
  if (o.k <= 0 || o.n <= 0 || o.m <= 0)
    fail("cli.args", {}, "", "--k, --n and --m must be positive (got {}, {}, {})", o.k, o.n, o.m);
  if (o.iters <= 0) fail("cli.args", {}, "", "--iters must be positive");
  if (o.rotate < 0) fail("cli.args", {}, "", "--rotate must be >= 0");
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

void bench_linear(const BenchLinearOptions& o) {
  check_options(o);
  set_compute_threads(o.threads);
  const bool dense = o.format == "fp32" || o.format == "bf16";
  const bool w8a8 = o.format == "fp8" || o.format == "int8";
  Prepared p = dense ? prepare_dense(o) : w8a8 ? prepare_scaled_mm(o) : prepare_wna16(o);

  Tensor x = random_float_tensor(o.m, o.k, DType::F32, 11);
  Tensor y = Tensor::empty({o.m, o.n}, DType::F32);
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
  for (int i = 0; i < o.iters; ++i) {
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
    j["kernel"] = p.kernel;
    j["threads"] = compute_threads();
    j["iters"] = o.iters;
    j["copies"] = p.copies;
    j["median_us"] = median;
    j["min_us"] = us.front();
    j["min_cpu_us"] = min_cpu_us;
    j["gflops"] = gflops;
    j["weight_gbps"] = gbps;
    j["weight_bytes"] = p.weight_bytes;
    j["cpu_features"] = cpu_features().describe();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s %s bits=%d group=%lld m=%lld k=%lld n=%lld threads=%d: median %.1f us (min %.1f), %.1f GFLOP/s, "
                "%.2f GB/s of weights (%zu bytes)\n",
                p.kernel.c_str(), o.format.c_str(), o.bits, static_cast<long long>(o.group),
                static_cast<long long>(o.m), static_cast<long long>(o.k), static_cast<long long>(o.n),
                compute_threads(), median, us.front(), gflops, gbps, p.weight_bytes);
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
  cmd->add_option("--m", opts->m, "Rows (tokens)")->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--kernel", opts->kernel, "Kernel or backend name (auto: the selector's choice)")->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Compute threads (0: all available cores)")->capture_default_str();
  cmd->add_option("--iters", opts->iters, "Timed iterations")->capture_default_str();
  cmd->add_option("--rotate", opts->rotate, "Copies of the layer cycled through (0: enough to exceed the caches)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->callback([opts] { bench_linear(*opts); });
}

}  // namespace qlm::cli
