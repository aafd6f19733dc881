// CPU W8A8 benchmarks: INT8 (per-channel weights, dynamic per-token int8 activations quantized
// inside the timed call) and FP8 (per-tensor weights, dynamic per-token fp8 activations) at
// K=14336 x N=4096 (Llama-3-8B down_proj), M = 1, 8, 512, plus the memory read bandwidth the M=1
// weight stream is compared against. Threads: QLM_THREADS (default: all available cores). Calls
// cycle through copies of the layer (>= 117 MB) so weights stream from memory. Counters: gflops
// (2*M*N*K per second), weight_gbps (prepared weight bytes per second), read_gbps.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/random_weights.h"
#include "kernels/cpu/scaled_mm_random.h"
#include "kernels/scaled_mm.h"

namespace qlm {
namespace {

constexpr int64_t kK = 14336, kN = 4096;

int bench_threads() {
  const char* env = std::getenv("QLM_THREADS");
  return env ? std::atoi(env) : 0;
}

struct Layer {
  std::vector<std::unique_ptr<ScaledMMKernel>> copies;
};

Layer& layer_for(const std::string& format) {
  static std::map<std::string, Layer> layers;
  Layer& l = layers[format];
  if (l.copies.empty()) {
    const ScaledMMConfig cfg = bench_scaled_mm_config(format, kK, kN);
    auto [entry, sel] = ScaledMMKernelRegistry::instance().select(cfg, DeviceType::CPU, "auto", "scaled-mm linear", "bench");
    const ScaledMMWeights w = random_scaled_mm_weights(cfg, 3);
    do {
      l.copies.push_back(entry->create(cfg));
      l.copies.back()->prepare(w);
    } while (l.copies.size() * l.copies.front()->weight_bytes() < (size_t{112} << 20));
  }
  return l;
}

void run(benchmark::State& state, const std::string& format) {
  set_compute_threads(bench_threads());
  const int64_t M = state.range(0);
  Layer& l = layer_for(format);
  const Tensor x = random_float_tensor(M, kK, DType::F32, 5);
  Tensor y = Tensor::empty({M, kN}, DType::F32);
  size_t i = 0;
  for (auto _ : state) {
    l.copies[i++ % l.copies.size()]->run(x, y, nullptr);
    benchmark::DoNotOptimize(y.data<float>());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["gflops"] = benchmark::Counter(2.0 * M * kN * kK * iters * 1e-9, benchmark::Counter::kIsRate);
  state.counters["weight_gbps"] = benchmark::Counter(
      static_cast<double>(l.copies.front()->weight_bytes()) * iters * 1e-9, benchmark::Counter::kIsRate);
  state.counters["threads"] = compute_threads();
  state.SetLabel(l.copies.front()->name());
}

void BM_Int8W8A8(benchmark::State& state) { run(state, "int8"); }
void BM_Fp8W8A8(benchmark::State& state) { run(state, "fp8"); }

// Sum over 256 MiB with the cpu_fast read kernel, split over the threads (0: all, 1: one).
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = state.range(0) == 0 ? bench_threads() : 1;
  set_compute_threads(threads);
  const CpuFastOps* ops = cpu_features().avx512 ? cpu_fast_avx512_ops() : cpu_fast_avx2_ops();
  const size_t count = (size_t{256} << 20) / sizeof(float);
  static AlignedBuffer<float> buf(count);
  static bool filled = false;
  if (!filled) {
    for (size_t k = 0; k < count; ++k) buf[k] = 1.0f;
    filled = true;
  }
  ThreadPool& pool = compute_pool();
  for (auto _ : state) {
    std::vector<float> part(static_cast<size_t>(pool.threads()), 0.f);
    pool.parallel_for(0, pool.threads(), 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t chunk = count / static_cast<size_t>(pool.threads());
        part[static_cast<size_t>(t)] = ops->read_sum(buf.data() + static_cast<size_t>(t) * chunk, chunk);
      }
    });
    benchmark::DoNotOptimize(part.data());
  }
  state.counters["read_gbps"] = benchmark::Counter(static_cast<double>(count * sizeof(float)) *
                                                       static_cast<double>(state.iterations()) * 1e-9,
                                                   benchmark::Counter::kIsRate);
  state.counters["threads"] = compute_threads();
}

BENCHMARK(BM_Int8W8A8)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Fp8W8A8)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ReadBandwidth)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace qlm

BENCHMARK_MAIN();
