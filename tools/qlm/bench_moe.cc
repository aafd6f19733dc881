// `qlm bench-moe`: times one fused-MoE layer (router, grouping, experts, combine) on random weights.
//   qlm bench-moe [--shape mixtral-8x7b|qwen3-30b-a3b] [--hidden H --intermediate I --experts E --top-k K]
//                 --format {bf16,gptq} [--bits B --group G --asym] --m 1,16,256 [--device cpu|cuda]
//                 [--dtype f32|bf16|f16] [--iters N] [--timing graph|events] [--threads T]
//                 [--bandwidth-gbps B] [--json]
// Every timed iteration routes fresh random router logits (uniform softmax top-k), so the experts
// touched change from one call to the next as in a model and do not stay in a cache. Reported per M:
//   moe_us      median time of the routed layer (CPU: wall clock; CUDA, --timing graph (the default): the device
//               time of each call replayed from a CUDA graph of its own, host launch overhead out, the calls'
//               graphs replayed in turn so that one routing's experts are not the next one's L2; where the layer
//               waits for the host (device_host_wait: the per-expert path reads the expert counts there) and
//               with --timing events: device events around the eager call, launch gaps and that host copy
//               included);
//   dense_us    the dense equivalent: the same layer with every token routed to the same top-k experts
//               (experts 0..k-1): the same FLOPs and the same kernels, the weights of only k experts,
//               i.e. the layer as a dense SiLU MLP of width k * I;
//   floor_us    bytes of the experts the routed calls touch (on average) / memory bandwidth.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "cuda/timing.h"
#include "kernels/cpu/random_weights.h"
#include "kernels/dense_linear.h"
#include "kernels/moe_kernel.h"
#include "kernels/mp_linear.h"
#include "layers/linear.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/device_bandwidth.h"

namespace qlm::cli {
namespace {

struct BenchMoEOptions {
  std::string shape = "mixtral-8x7b";
  int64_t hidden = 0, intermediate = 0, experts = 0, top_k = 0;  // 0: from --shape
  std::string format = "gptq";
  int bits = 4;
  int64_t group = 128;
  bool asym = false;
  std::vector<int64_t> ms{1, 16, 256};
  std::string device = "cpu";
  std::string dtype = "auto";
  int iters = 10;
  std::string timing = "graph";  // cuda: graph | events
  int threads = 0;
  double bandwidth_gbps = 0;  // 0: measured (CUDA: device copy bandwidth; CPU: parallel read)
  bool json = false;
};

void apply_shape(BenchMoEOptions& o) {
  struct Shape {
    int64_t hidden, intermediate, experts, top_k;
  };
  Shape s{};
  if (o.shape == "mixtral-8x7b") {
    s = {4096, 14336, 8, 2};
  } else if (o.shape == "qwen3-30b-a3b") {
    s = {2048, 768, 128, 8};
  } else if (o.shape != "custom") {
    fail("cli.args", {}, "use --shape mixtral-8x7b, qwen3-30b-a3b or custom", "unknown --shape {}", o.shape);
  }
  if (o.hidden == 0) o.hidden = s.hidden;
  if (o.intermediate == 0) o.intermediate = s.intermediate;
  if (o.experts == 0) o.experts = s.experts;
  if (o.top_k == 0) o.top_k = s.top_k;
  if (o.hidden <= 0 || o.intermediate <= 0 || o.experts <= 0 || o.top_k <= 0 || o.top_k > o.experts)
    fail("cli.args", {}, "give --hidden, --intermediate, --experts and --top-k (top-k <= experts)",
         "invalid MoE shape H={} I={} E={} top-k={}", o.hidden, o.intermediate, o.experts, o.top_k);
  if (o.format != "bf16" && o.format != "gptq")
    fail("cli.args", {}, "use --format bf16 or gptq", "unknown --format {}", o.format);
  if (o.format == "gptq" && (o.group != -1 && (o.group <= 0 || o.hidden % o.group || o.intermediate % o.group)))
    fail("cli.args", {}, "use a group size dividing hidden and intermediate sizes, or -1",
         "--group {} does not divide H={} and I={}", o.group, o.hidden, o.intermediate);
  if (o.iters <= 0) fail("cli.args", {}, "", "--iters must be positive");
  for (int64_t m : o.ms)
    if (m <= 0) fail("cli.args", {}, "", "--m values must be positive (got {})", m);
  if (o.device == "cuda") {
    if (!cuda_backend_built())
      fail("cli.no_cuda", {}, "rebuild with -DQLM_CUDA=ON, or use --device cpu", "this qlm was built without CUDA");
    if (cuda_devices().empty())
      fail("cuda.unavailable", {}, "run on a machine with an NVIDIA GPU, or use --device cpu",
           "no CUDA device is visible");
  } else if (o.dtype != "auto" && o.dtype != "f32") {
    fail("cli.args", {}, "use --dtype f32 (or --device cuda)", "--dtype {} is for CUDA; the CPU takes f32", o.dtype);
  }
}

// A linear kernel of any registry behind one call: y = x · W.
struct Projection {
  std::string kernel;
  size_t bytes = 0;
  std::function<Tensor(const Tensor&)> run;
};

struct Layer {
  MoEKernelConfig cfg;
  std::unique_ptr<MoEKernel> kernel;
  std::string w13_kernel;
  size_t expert_bytes = 0;  // prepared w13 + w2 bytes of one expert
};

Projection make_projection(const BenchMoEOptions& o, const MoEKernelConfig& c, int64_t K, int64_t N, uint64_t seed,
                           WNA16Weights* standard) {
  if (o.format == "bf16") {
    DenseLinearConfig cfg{.K_p = K,
                          .N_p = N,
                          .weight_dtype = DType::BF16,
                          .act_dtype = c.act_dtype,
                          .device = c.device,
                          .capability = c.capability};
    auto [entry, sel] = DenseKernelRegistry::instance().select(cfg, c.device.type, "auto", "dense linear", "bench");
    std::shared_ptr<DenseLinearKernel> k = entry->create(cfg);
    k->prepare(random_float_tensor(N, K, DType::BF16, seed));
    return {k->name(), k->weight_bytes(), [k, N](const Tensor& x) {
              Tensor y = allocate_linear_output(x, N);
              k->run(x, y, nullptr);
              return y;
            }};
  }
  *standard = random_wna16_weights(
      {.bits = o.bits, .K = K, .N = N, .group_size = o.group, .zero_points = o.asym, .act_order = false, .seed = seed});
  MPLinearLayerConfig cfg;
  cfg.K = cfg.K_p = K;
  cfg.N = cfg.N_p = N;
  cfg.weight_type = standard->weight_type;
  cfg.zero_points = o.asym;
  cfg.group_size = o.group;
  cfg.act_dtype = c.act_dtype;
  cfg.device = c.device;
  cfg.capability = c.capability;
  auto [entry, sel] =
      MPKernelRegistry::instance().select(cfg, c.device.type, "auto", "mixed-precision linear", "bench");
  std::shared_ptr<MPLinearKernel> k = entry->create(cfg);
  k->prepare(*standard);
  return {k->name(), k->weight_bytes(), [k, N](const Tensor& x) {
            Tensor y = allocate_linear_output(x, N);
            k->run(x, y, nullptr);
            return y;
          }};
}

Layer make_layer(const BenchMoEOptions& o) {
  Layer L;
  MoEKernelConfig& c = L.cfg;
  c.num_experts = c.local_experts = o.experts;
  c.top_k = o.top_k;
  c.hidden_size = o.hidden;
  c.intermediate_size = c.intermediate_per_partition = o.intermediate;
  c.format = o.format;
  c.renormalize = true;
  if (o.device == "cuda") {
    c.device = Device::cuda(0);
    c.capability = cuda_capability(0);
    c.act_dtype = o.dtype == "f32" ? DType::F32 : o.dtype == "f16" ? DType::F16 : DType::BF16;
  }
  auto [entry, sel] = MoEKernelRegistry::instance().select(c, c.device.type, "auto", "fused-MoE", "bench");
  L.kernel = entry->create(c);
  const bool wna16 = o.format == "gptq";
  std::vector<MoEExpertOps> ops;
  std::vector<WNA16Weights> standard(static_cast<size_t>(2 * o.experts));
  for (int64_t e = 0; e < o.experts; ++e) {
    WNA16Weights* s13 = &standard[static_cast<size_t>(2 * e)];
    WNA16Weights* s2 = &standard[static_cast<size_t>(2 * e + 1)];
    const Projection w13 = make_projection(o, c, o.hidden, 2 * o.intermediate, 1000 + 2 * e, s13);
    const Projection w2 = make_projection(o, c, o.intermediate, o.hidden, 1001 + 2 * e, s2);
    if (e == 0) {
      // A kernel that holds WNA16 experts itself runs them in its own layout, not on w13 / w2.
      L.w13_kernel = wna16 && L.kernel->runs_wna16_experts() ? L.kernel->name() + " (own layout)" : w13.kernel;
      L.expert_bytes = w13.bytes + w2.bytes;
    }
    ops.push_back(MoEExpertOps{
        .id = e, .w13 = w13.run, .w2 = w2.run, .w13_wna16 = wna16 ? s13 : nullptr, .w2_wna16 = wna16 ? s2 : nullptr});
  }
  L.kernel->prepare(std::move(ops));
  return L;
}

// Router logits [m, E]: uniform random (routed), or experts 0..k-1 far ahead (every token on them).
Tensor router_logits(int64_t m, int64_t E, int64_t k, bool same_experts, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> l(static_cast<size_t>(m * E));
  for (int64_t t = 0; t < m; ++t)
    for (int64_t e = 0; e < E; ++e) l[t * E + e] = u(rng) + (same_experts && e < k ? 100.0f : 0.0f);
  return Tensor::from_vector(l, {m, E});
}

// Read bandwidth of this machine's memory (GB/s): the best of 3 parallel sums over 1 GiB.
double measure_cpu_bandwidth() {
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(static_cast<size_t>(compute_threads()) * 8, 0);
    const auto t0 = std::chrono::steady_clock::now();
    compute_pool().parallel_for(0, static_cast<int64_t>(n), 1 << 20, [&](int64_t b, int64_t e) {
      uint64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += buf[static_cast<size_t>(i)];
      sums[static_cast<size_t>(b * compute_threads() / static_cast<int64_t>(n)) * 8] += s;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t total = 0;
    for (uint64_t v : sums) total += v;
    if (total != n) std::fprintf(stderr, "note: bandwidth probe sum %llu\n", static_cast<unsigned long long>(total));
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s * 1e-9);
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median and minimum microseconds of the layer over `logits` (one call each); *timing says how CUDA calls were timed:
// "graph" where asked for and the layer enqueues only device work at x's token count, else "events".
std::pair<double, double> time_calls(const Layer& L, const Tensor& x, const std::vector<Tensor>& logits,
                                     const std::string& asked, std::string* timing) {
  const bool gpu = !L.cfg.device.is_cpu();
  std::vector<double> us;
  auto call = [&](const Tensor& l) {
    if (gpu) return (void)L.kernel->run_device(x, l);
    Tensor y = Tensor::zeros({x.size(0), L.cfg.hidden_size}, DType::F32);
    L.kernel->run(x, select_experts(l, L.cfg.top_k, L.cfg.renormalize), y);
  };
  call(logits.front());  // warm-up
  *timing = gpu ? "events" : "wall";
  if (gpu && asked == "graph" && L.kernel->device_host_wait(x.size(0)).empty()) {
    std::vector<std::function<void()>> works;
    for (const Tensor& l : logits) works.push_back([&call, &l] { call(l); });
    us = cuda::time_graphs_us(L.cfg.device.index, works);
    *timing = "graph";
    return {median(us), *std::min_element(us.begin(), us.end())};
  }
  for (const Tensor& l : logits) {
    if (gpu) {
      us.push_back(cuda::time_device_us(L.cfg.device.index, [&] { call(l); }));
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    call(l);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return {median(us), *std::min_element(us.begin(), us.end())};
}

void bench_moe(BenchMoEOptions o) {
  apply_shape(o);
  set_compute_threads(o.threads);
  const bool gpu = o.device == "cuda";
  const double bandwidth = o.bandwidth_gbps > 0 ? o.bandwidth_gbps
                           : gpu                ? copy_bandwidth_gbps(Device::cuda(0))
                                                : measure_cpu_bandwidth();
  const Layer L = make_layer(o);
  const int64_t E = o.experts, k = o.top_k;
  for (int64_t m : o.ms) {
    Tensor x = random_float_tensor(m, o.hidden, gpu ? L.cfg.act_dtype : DType::F32, 11);
    std::vector<Tensor> routed, same;
    double touched = 0;
    for (int i = 0; i < o.iters; ++i) {
      Tensor l = router_logits(m, E, k, false, 100 + static_cast<uint64_t>(i));
      const MoERouting r = select_experts(l, k, true);
      std::set<int32_t> used(r.topk_ids.begin(), r.topk_ids.end());
      touched += static_cast<double>(used.size()) / o.iters;
      routed.push_back(l);
      same.push_back(router_logits(m, E, k, true, 100 + static_cast<uint64_t>(i)));
    }
    if (gpu) {
      x = x.to_device(L.cfg.device);
      for (Tensor& l : routed) l = l.to_device(L.cfg.device);
      for (Tensor& l : same) l = l.to_device(L.cfg.device);
    }
    std::string moe_timing, dense_timing;
    const auto [moe_us, moe_min] = time_calls(L, x, routed, o.timing, &moe_timing);
    const auto [dense_us, dense_min] = time_calls(L, x, same, o.timing, &dense_timing);
    const double bytes = touched * static_cast<double>(L.expert_bytes);
    const double floor_us = bytes / (bandwidth * 1e3);
    if (o.json) {
      nlohmann::ordered_json j;
      j["shape"] = o.shape;
      j["format"] = o.format;
      j["bits"] = o.format == "bf16" ? 16 : o.bits;
      j["group"] = o.format == "bf16" ? 0 : o.group;
      j["m"] = m;
      j["hidden"] = o.hidden;
      j["intermediate"] = o.intermediate;
      j["experts"] = E;
      j["top_k"] = k;
      j["device"] = o.device;
      j["act_dtype"] = dtype_name(L.cfg.act_dtype);
      j["kernel"] = L.kernel->name();
      j["expert_kernel"] = L.w13_kernel;
      if (const std::string path = L.kernel->experts_path(m); !path.empty()) j["path"] = path;
      j["threads"] = compute_threads();
      j["iters"] = o.iters;
      j["timing"] = moe_timing;
      if (dense_timing != moe_timing) j["dense_timing"] = dense_timing;
      j["moe_us"] = moe_us;
      j["moe_min_us"] = moe_min;
      j["dense_us"] = dense_us;
      j["dense_min_us"] = dense_min;
      j["experts_touched"] = touched;
      j["expert_bytes"] = L.expert_bytes;
      j["touched_bytes"] = bytes;
      j["bandwidth_gbps"] = bandwidth;
      j["floor_us"] = floor_us;
      j["floor_fraction"] = floor_us / moe_us;
      if (gpu) j["gpu"] = cuda_devices().at(0).name;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "%s %s E=%lld top-%lld H=%lld I=%lld m=%lld [%s, experts on %s; %s]: %.1f us (min %.1f); same-experts "
          "dense equivalent %.1f us; floor %.1f us (%.1f experts touched, %.0f MB at %.0f GB/s)\n",
          o.shape.c_str(), o.format.c_str(), static_cast<long long>(E), static_cast<long long>(k),
          static_cast<long long>(o.hidden), static_cast<long long>(o.intermediate), static_cast<long long>(m),
          L.kernel->name().c_str(), L.w13_kernel.c_str(), moe_timing.c_str(), moe_us, moe_min, dense_us, floor_us,
          touched, bytes * 1e-6, bandwidth);
    }
    std::fflush(stdout);
  }
}

}  // namespace

void register_bench_moe_command(CLI::App& app) {
  auto opts = std::make_shared<BenchMoEOptions>();
  auto* cmd = app.add_subcommand("bench-moe", "Time one fused mixture-of-experts layer on random weights");
  cmd->add_option("--shape", opts->shape, "mixtral-8x7b, qwen3-30b-a3b or custom (then --hidden ... --top-k)")
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden size (overrides the shape)");
  cmd->add_option("--intermediate", opts->intermediate, "Intermediate size of one expert (overrides the shape)");
  cmd->add_option("--experts", opts->experts, "Experts (overrides the shape)");
  cmd->add_option("--top-k", opts->top_k, "Experts per token (overrides the shape)");
  cmd->add_option("--format", opts->format, "Expert weights: bf16 or gptq")
      ->check(CLI::IsMember({"bf16", "gptq"}))
      ->capture_default_str();
  cmd->add_option("--bits", opts->bits, "GPTQ bits")->check(CLI::IsMember({2, 3, 4, 8}))->capture_default_str();
  cmd->add_option("--group", opts->group, "GPTQ group size, -1 for channelwise")->capture_default_str();
  cmd->add_flag("--asym", opts->asym, "GPTQ zero points");
  cmd->add_option("--m", opts->ms, "Tokens; a comma list times each on the same layer (one line each)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype, "Activation dtype on CUDA (auto: bf16)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--iters", opts->iters, "Timed calls (each on fresh router logits)")->capture_default_str();
  cmd->add_option("--timing", opts->timing,
                  "CUDA timing: graph (each call replayed from a CUDA graph, where the layer does not wait for the "
                  "host) or events (eager calls)")
      ->check(CLI::IsMember({"graph", "events"}))
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "CPU compute threads (0: all available cores)")->capture_default_str();
  cmd->add_option(
         "--bandwidth-gbps", opts->bandwidth_gbps,
         "Memory bandwidth for the floor (0: measured: the GPU's device copy bandwidth, the CPU's parallel read)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "One JSON object per M");
  cmd->callback([opts] { bench_moe(*opts); });
}

}  // namespace qlm::cli
