// `qlm bench-attention`: times the decode step's attention (one query token against a KV cache of C
// slots) on the GPU, the op whose cost grows with the context.
//   qlm bench-attention [--shape llama3-8b|llama3-70b | --heads H --kv-heads KV --head-dim D]
//                       [--context 16,256,1024,4096,16384] [--kv-dtype bf16|f16|f32|fp8]
//                       [--capacity-factor F] [--layers L] [--iters N] [--json]
// Per context: a cache of L layers (default: enough that the K / V bytes of all of them exceed the
// L2 cache several times) filled with random rows, one query; a CUDA graph of L attention calls (one
// per layer, as a model's step makes them) is replayed --iters times, so each call reads K / V that
// are not in L2 and host launch gaps are out. The cache capacity is F x (C + 1) slots (the model's
// capacity doubles as it grows, so F = 2 is a decode step right after a growth). Reported per context:
//   us          median time of one attention call (replay time / L);
//   floor_us    bytes it must read (K and V of C + 1 slots, the query) and write / device-to-device
//               copy bandwidth (read + write bytes per second, measured here on 1 GiB);
//   chunks      the flash-decoding chunks the capacity gives (0: one block per kv head, no combine);
//   form        the kernels that ran (per-head, per-head chunked, decode, decode paired, decode lanes: launch.h);
//   lanes_parts the lanes form's blocks per chunk (one cluster; 0: another form).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/error.h"
#include "cuda/device.h"
#include "cuda/timing.h"
#include "kernels/cpu/random_weights.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cuda/device_kv_cache.h"
#include "runtime/ops/cuda/device_ops.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/device_bandwidth.h"

#ifdef QLM_WITH_CUDA
#include "runtime/ops/cuda/launch.h"  // attention_chunks
#endif

namespace qlm::cli {
namespace {

struct BenchAttentionOptions {
  std::string shape = "llama3-8b";
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // 0: from --shape
  std::vector<int64_t> contexts{16, 256, 1024, 4096, 16384};
  std::string kv_dtype = "bf16";
  double capacity_factor = 1.0;
  int64_t layers = 0;  // 0: auto
  int iters = 20;
  bool json = false;
};

void check_options(BenchAttentionOptions& o) {
  struct Shape {
    int64_t heads, kv_heads, head_dim;
  };
  Shape s{};
  if (o.shape == "llama3-8b") {
    s = {32, 8, 128};
  } else if (o.shape == "llama3-70b") {
    s = {64, 8, 128};
  } else if (o.shape != "custom") {
    fail("cli.args", {}, "use --shape llama3-8b, llama3-70b or custom", "unknown --shape {}", o.shape);
  }
  if (o.heads == 0) o.heads = s.heads;
  if (o.kv_heads == 0) o.kv_heads = s.kv_heads;
  if (o.head_dim == 0) o.head_dim = s.head_dim;
  if (o.heads <= 0 || o.kv_heads <= 0 || o.head_dim <= 0 || o.heads % o.kv_heads != 0)
    fail("cli.args", {}, "give --heads, --kv-heads (dividing heads) and --head-dim",
         "invalid attention shape heads={} kv_heads={} head_dim={}", o.heads, o.kv_heads, o.head_dim);
  for (int64_t c : o.contexts)
    if (c < 0) fail("cli.args", {}, "", "--context values must be >= 0 (got {})", c);
  if (o.capacity_factor < 1.0)
    fail("cli.args", {}, "use --capacity-factor 1 or more", "--capacity-factor {} < 1", o.capacity_factor);
  if (o.iters <= 0 || o.layers < 0) fail("cli.args", {}, "", "--iters must be positive and --layers >= 0");
  if (!cuda_backend_built())
    fail("cli.no_cuda", {}, "rebuild with -DQLM_CUDA=ON", "bench-attention times the CUDA kernels; this qlm has none");
  if (cuda_devices().empty())
    fail("cuda.unavailable", {}, "run on a machine with an NVIDIA GPU", "no CUDA device is visible");
}

#ifdef QLM_WITH_CUDA

ops::KvDType parse_kv(const std::string& name) {
  using ops::KvDType;
  if (name == "bf16") return KvDType::BF16;
  if (name == "f16") return KvDType::F16;
  if (name == "f32") return KvDType::F32;
  if (name == "fp8") return KvDType::F8E4M3;
  fail("cli.args", {}, "use --kv-dtype bf16, f16, f32 or fp8", "unknown --kv-dtype {}", name);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Fills slots [0, slots) of every layer with random K / V rows, 1024 slots per write.
void fill_cache(ops::cu::DeviceKvCache& cache, int64_t slots) {
  const int64_t row = cache.kv_heads() * cache.head_dim();
  for (int64_t l = 0; l < cache.layers(); ++l)
    for (int64_t s0 = 0; s0 < slots; s0 += 1024) {
      const int64_t n = std::min<int64_t>(1024, slots - s0);
      const Tensor kv = random_float_tensor(n, 2 * row, DType::F32, static_cast<uint64_t>(l * 1000003 + s0))
                            .to_device(cache.device());
      cache.write(l, s0, kv, 0, row);
    }
}

void bench_attention(BenchAttentionOptions o) {
  check_options(o);
  const Device device = Device::cuda(0);
  const ops::KvDType kv_dtype = parse_kv(o.kv_dtype);
  const double bandwidth = copy_bandwidth_gbps(device);
  const int64_t row = o.kv_heads * o.head_dim;
  const ops::AttentionParams params{.heads = o.heads,
                                    .kv_heads = o.kv_heads,
                                    .head_dim = o.head_dim,
                                    .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(o.head_dim)))};
  const Tensor q = random_float_tensor(1, o.heads * o.head_dim, DType::F32, 7).to_device(device);
  for (const int64_t context : o.contexts) {
    const int64_t slots = context + 1;  // the query's own slot is written before attention reads it
    const double kv_bytes = 2.0 * static_cast<double>(slots * row) * static_cast<double>(ops::kv_dtype_size(kv_dtype));
    // Layers: the K / V of all of them at least 4x a 60 MB L2 (240 MB), 2 to 64 of them, 2 GiB at most.
    const int64_t wanted = static_cast<int64_t>(std::ceil(240e6 / kv_bytes));
    const int64_t fit = std::max<int64_t>(2, static_cast<int64_t>(2.1e9 / kv_bytes));
    const int64_t layers = o.layers > 0 ? o.layers : std::clamp<int64_t>(wanted, 2, std::min<int64_t>(64, fit));
    ops::cu::DeviceKvCache cache(device, layers, o.kv_heads, o.head_dim, {kv_dtype});
    cache.reserve(static_cast<int64_t>(std::ceil(o.capacity_factor * static_cast<double>(slots))));
    fill_cache(cache, slots);
    const std::string form = ops::cu::attention_form(1, context, cache, params);
    const int lanes_parts = ops::cu::attention_lanes_parts(1, context, cache, params);
    const auto step = [&] {
      for (int64_t l = 0; l < cache.layers(); ++l) (void)ops::cu::attention(q, context, cache, l, params, DType::BF16);
    };
    std::vector<double> us;
    for (double replay : cuda::time_graph_us(device.index, step, o.iters))
      us.push_back(replay / static_cast<double>(cache.layers()));
    const double t = median(us);
    const double bytes = kv_bytes + 4.0 * static_cast<double>(o.heads * o.head_dim) +
                         2.0 * static_cast<double>(o.heads * o.head_dim);  // q (F32) in, out (BF16)
    const double floor_us = bytes / (bandwidth * 1e3);
    const int64_t chunks = ops::cu::attention_chunks(1, cache.capacity());
    if (o.json) {
      nlohmann::ordered_json j;
      j["shape"] = o.shape;
      j["heads"] = o.heads;
      j["kv_heads"] = o.kv_heads;
      j["head_dim"] = o.head_dim;
      j["kv_dtype"] = o.kv_dtype;
      j["context"] = context;
      j["capacity"] = cache.capacity();
      j["chunks"] = chunks;
      j["form"] = form;
      j["lanes_parts"] = lanes_parts;
      j["layers"] = cache.layers();
      j["iters"] = o.iters;
      j["us"] = t;
      j["min_us"] = *std::min_element(us.begin(), us.end());
      j["bytes"] = bytes;
      j["copy_gbps"] = bandwidth;
      j["floor_us"] = floor_us;
      j["floor_fraction"] = floor_us / t;
      j["gpu"] = cuda_devices().at(0).name;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "%s kv %s context %lld (capacity %lld, %lld chunks, %s, %lld layers): %.2f us; floor %.2f us (%.0f%%, "
          "%.1f MB at %.0f GB/s)\n",
          o.shape.c_str(), o.kv_dtype.c_str(), static_cast<long long>(context),
          static_cast<long long>(cache.capacity()), static_cast<long long>(chunks), form.c_str(),
          static_cast<long long>(cache.layers()), t, floor_us, 100.0 * floor_us / t, bytes * 1e-6, bandwidth);
    }
    std::fflush(stdout);
  }
}

#else

void bench_attention(BenchAttentionOptions o) { check_options(o); }  // fails: no CUDA backend

#endif

}  // namespace

void register_bench_attention_command(CLI::App& app) {
  auto opts = std::make_shared<BenchAttentionOptions>();
  auto* cmd =
      app.add_subcommand("bench-attention", "Time the CUDA decode attention against a KV cache of given contexts");
  cmd->add_option("--shape", opts->shape, "llama3-8b, llama3-70b or custom (then --heads, --kv-heads, --head-dim)")
      ->capture_default_str();
  cmd->add_option("--heads", opts->heads, "Query heads (overrides the shape)");
  cmd->add_option("--kv-heads", opts->kv_heads, "KV heads (overrides the shape)");
  cmd->add_option("--head-dim", opts->head_dim, "Head size (overrides the shape)");
  cmd->add_option("--context", opts->contexts, "Slots before the query token; a comma list times each")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--kv-dtype", opts->kv_dtype, "Cache storage: bf16, f16, f32 or fp8 (e4m3)")
      ->check(CLI::IsMember({"bf16", "f16", "f32", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--capacity-factor", opts->capacity_factor,
                  "Cache capacity as a multiple of context + 1 (2: right after the cache doubled)")
      ->capture_default_str();
  cmd->add_option("--layers", opts->layers, "Layers cycled through in one graph (0: enough to exceed L2)");
  cmd->add_option("--iters", opts->iters, "Graph replays timed")->capture_default_str();
  cmd->add_flag("--json", opts->json, "One JSON object per context");
  cmd->callback([opts] { bench_attention(*opts); });
}

}  // namespace qlm::cli
