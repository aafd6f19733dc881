// Decode tokens/s of whole models on CPU.
//   BM_Decode/<fixture>: the committed tiny fixtures (tests/data/models).
//   BM_DecodeLlama8B:    a Llama-3-8B-shaped int4 GPTQ checkpoint (g128, lm_head quantized) with
//                        random weights, generated into a temporary directory (about 4.9 GB; removed
//                        afterwards). Runs only with QLM_BENCH_8B=1; QLM_BENCH_TMP picks the parent
//                        directory (default: the system temp dir).
//   BM_ReadBandwidth:    memory read bandwidth (all compute threads), for the bandwidth floor:
//                        decode tokens/s can at best be bandwidth / weight bytes read per token.
// QLM_THREADS sets the compute threads (default: all cores).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "bench/synthetic_checkpoint.h"
#include "core/thread_pool.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/cpu_fast.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/model.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;

int bench_threads() {
  const char* env = std::getenv("QLM_THREADS");
  return env ? std::atoi(env) : 0;
}

fs::path fixture_dir(const std::string& name) {
  return fs::path(__FILE__).parent_path().parent_path() / "tests" / "data" / "models" / name;
}

// Prefill of `prompt` tokens, then timed single-token decode steps; one iteration = one step.
void run_decode(benchmark::State& state, runtime::Model& model, int64_t prompt, int64_t max_len) {
  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i)
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % model.vocab_size());
  model.reset();
  model.forward(tokens, false);
  int32_t next = 1;
  for (auto _ : state) {
    if (model.cache_length() >= max_len) {
      state.PauseTiming();
      model.reset();
      model.forward(tokens, false);
      state.ResumeTiming();
    }
    const int32_t one[1] = {next};
    Tensor logits = model.forward(one, false);
    next = static_cast<int32_t>((next * 31 + 7) % model.vocab_size());
    benchmark::DoNotOptimize(logits.raw_data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_bytes_per_token"] = static_cast<double>(model.linear_weight_bytes());
  state.counters["weight_gbps"] = benchmark::Counter(
      static_cast<double>(model.linear_weight_bytes()) * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(model.plan().summary());
}

void BM_Decode(benchmark::State& state, const std::string& fixture) {
  auto model = runtime::Model::load(fixture_dir(fixture), {.threads = bench_threads()});
  run_decode(state, *model, 8, 200);
}
BENCHMARK_CAPTURE(BM_Decode, llama_gqa, std::string("llama-gqa"))->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Decode, llama_gqa_gptq, std::string("llama-gqa-gptq"))
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_DecodeLlama8B(benchmark::State& state) {
  if (const char* on = std::getenv("QLM_BENCH_8B"); !on || std::string(on) != "1") {
    state.SkipWithError("set QLM_BENCH_8B=1 to generate and run the 8B-shaped checkpoint (~4.9 GB of disk)");
    return;
  }
  set_compute_threads(bench_threads());
  const char* parent = std::getenv("QLM_BENCH_TMP");
  const fs::path dir =
      (parent ? fs::path(parent) : fs::temp_directory_path()) / ("qlm-llama8b-gptq-" + std::to_string(::getpid()));
  struct TempTree {
    fs::path dir;
    void remove() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
      dir.clear();
    }
    ~TempTree() { remove(); }
  } tree{dir};
  auto t0 = std::chrono::steady_clock::now();
  const uint64_t bytes = bench::write_synthetic_checkpoint(dir, {});
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto model = runtime::Model::load(dir, {.threads = bench_threads()});
  tree.remove();  // the weights live in memory now
  run_decode(state, *model, 16, 256);
  state.counters["checkpoint_gb"] = static_cast<double>(bytes) * 1e-9;
  state.counters["write_s"] = write_s;
  state.counters["load_s"] = model->load_seconds();
}
BENCHMARK(BM_DecodeLlama8B)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(16);

void BM_ReadBandwidth(benchmark::State& state) {
  set_compute_threads(bench_threads());
  const CpuFastOps* ops = cpu_features().avx512 ? cpu_fast_avx512_ops() : cpu_fast_avx2_ops();
  constexpr size_t kCount = size_t{256} << 20 >> 2;  // 256 MiB of floats
  AlignedBuffer<float> buffer;
  buffer.resize(kCount);
  ThreadPool& pool = compute_pool();
  pool.parallel_for(0, kCount, 1 << 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buffer[i] = 1.0f;
  });
  std::vector<float> sums(static_cast<size_t>(pool.threads()));
  for (auto _ : state) {
    pool.run(pool.threads(), [&](int64_t t) {
      const size_t b = kCount * t / pool.threads(), e = kCount * (t + 1) / pool.threads();
      sums[static_cast<size_t>(t)] = ops->read_sum(buffer.data() + b, e - b);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["read_gbps"] =
      benchmark::Counter(static_cast<double>(kCount * sizeof(float)) * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = pool.threads();
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(1.0);

}  // namespace
}  // namespace qlm

BENCHMARK_MAIN();
