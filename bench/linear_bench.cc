// CPU linear-layer benchmarks: the int4 g128 W4A16 layer K=14336 x N=4096 (Llama-3-8B down_proj)
// at M = 1, 8, 512 on the selector's kernel and on the float cpu_fast_avx512, the same shape in dense fp32 for
// comparison, and the memory read bandwidth the M=1 weight stream is compared against. Threads: QLM_THREADS (default:
// all available cores). Calls cycle through kCopies copies of the layer (124 MB of int4 weights, beyond the 32 MiB L3),
// so weights stream from memory as in a model. Counters: gflops (2*M*N*K per second), weight_gbps (prepared weight
// bytes per second), read_gbps (read benchmark).
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
#include "kernels/dense_linear.h"
#include "kernels/mp_linear.h"

namespace qlm {
namespace {

constexpr int64_t kK = 14336, kN = 4096;
constexpr int kCopies = 4;

int bench_threads() {
  const char* env = std::getenv("QLM_THREADS");
  return env ? std::atoi(env) : 0;
}

void set_counters(benchmark::State& state, int64_t M, size_t weight_bytes, const std::string& kernel) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["gflops"] = benchmark::Counter(2.0 * M * kN * kK * iters * 1e-9, benchmark::Counter::kIsRate);
  state.counters["weight_gbps"] =
      benchmark::Counter(static_cast<double>(weight_bytes) * iters * 1e-9, benchmark::Counter::kIsRate);
  state.counters["threads"] = compute_threads();
  state.SetLabel(kernel);
}

// The W4A16 layer on the kernel `backend` selects ("auto": the selector's first choice).
void run_w4a16(benchmark::State& state, const char* backend) {
  set_compute_threads(bench_threads());
  const int64_t M = state.range(0);
  static std::map<std::string, std::vector<std::unique_ptr<MPLinearKernel>>> prepared;  // once for every M
  auto& kernels = prepared[backend];
  if (kernels.empty()) {
    WNA16Weights w = random_wna16_weights({.bits = 4, .K = kK, .N = kN, .group_size = 128, .seed = 3});
    MPLinearLayerConfig cfg;
    cfg.K = cfg.K_p = kK;
    cfg.N = cfg.N_p = kN;
    cfg.weight_type = w.weight_type;
    cfg.group_size = 128;
    auto [entry, sel] =
        MPKernelRegistry::instance().select(cfg, DeviceType::CPU, backend, "mixed-precision linear", "bench");
    for (int c = 0; c < kCopies; ++c) {
      kernels.push_back(entry->create(cfg));
      kernels.back()->prepare(w);
    }
  }
  const Tensor x = random_float_tensor(M, kK, DType::F32, 5);
  Tensor y = Tensor::empty({M, kN}, DType::F32);
  size_t i = 0;
  for (auto _ : state) {
    kernels[i++ % kernels.size()]->run(x, y, nullptr);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_counters(state, M, kernels.front()->weight_bytes(), kernels.front()->name());
}

void BM_W4A16_G128(benchmark::State& state) { run_w4a16(state, "auto"); }
BENCHMARK(BM_W4A16_G128)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);

// The float kernel beside the VNNI one the selector prefers, measured in the same run.
void BM_W4A16_G128_Float(benchmark::State& state) {
  if (!cpu_features().avx512_vnni) {
    state.SkipWithError("no AVX-512 VNNI: BM_W4A16_G128 already runs the float kernel");
    return;
  }
  run_w4a16(state, "cpu_fast_avx512");
}
BENCHMARK(BM_W4A16_G128_Float)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);

void BM_DenseF32(benchmark::State& state) {
  set_compute_threads(bench_threads());
  const int64_t M = state.range(0);
  static std::unique_ptr<DenseLinearKernel> kernel;
  if (!kernel) {
    DenseLinearConfig cfg{.K_p = kK, .N_p = kN, .weight_dtype = DType::F32, .act_dtype = DType::F32};
    auto [entry, sel] = DenseKernelRegistry::instance().select(cfg, DeviceType::CPU, "auto", "dense linear", "bench");
    kernel = entry->create(cfg);
    kernel->prepare(random_float_tensor(kN, kK, DType::F32, 9));
  }
  const Tensor x = random_float_tensor(M, kK, DType::F32, 5);
  Tensor y = Tensor::empty({M, kN}, DType::F32);
  for (auto _ : state) {
    kernel->run(x, y, nullptr);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_counters(state, M, kernel->weight_bytes(), kernel->name());
}
BENCHMARK(BM_DenseF32)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);

// STREAM-like read of a buffer far larger than the caches, split over the compute threads.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  set_compute_threads(threads == 0 ? bench_threads() : threads);
  const CpuFastOps* ops = cpu_features().avx512 ? cpu_fast_avx512_ops() : cpu_fast_avx2_ops();
  constexpr size_t kCount = size_t{256} << 20 >> 2;  // 256 MiB of floats
  static AlignedBuffer<float> buffer;
  if (buffer.size() != kCount) {
    buffer.resize(kCount);
    compute_pool().parallel_for(0, kCount, 1 << 20, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) buffer[i] = 1.0f;
    });
  }
  ThreadPool& pool = compute_pool();
  std::vector<float> sums(pool.threads());
  for (auto _ : state) {
    pool.run(pool.threads(), [&](int64_t t) {
      const size_t b = kCount * t / pool.threads(), e = kCount * (t + 1) / pool.threads();
      sums[t] = ops->read_sum(buffer.data() + b, e - b);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["read_gbps"] = benchmark::Counter(
      static_cast<double>(kCount * sizeof(float)) * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
  state.counters["threads"] = pool.threads();
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(1.0);

}  // namespace
}  // namespace qlm

BENCHMARK_MAIN();
