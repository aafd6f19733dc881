#ifdef QLM_WITH_CUDA
#include "kernels/cuda/lt_algo_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "core/tensor.h"
#include "cuda/cuda_check.h"

namespace qlm::cuda {
namespace {

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, cublasLtMatmulAlgo_t>& cache() {
  static std::map<std::string, cublasLtMatmulAlgo_t> c;
  return c;
}

// Destroys the events of one tuning, whatever path leaves it.
struct EventSet {
  std::vector<cudaEvent_t> events;
  ~EventSet() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  cudaEvent_t add() {
    cudaEvent_t e = nullptr;
    QLM_CUDA_CHECK(cudaEventCreate(&e));
    events.push_back(e);
    return e;
  }
};

}  // namespace

bool lt_autotune_enabled(bool spec_default) {
  const char* env = std::getenv("QLM_LT_AUTOTUNE");
  if (!env || !*env) return spec_default;
  return std::strcmp(env, "0") != 0;
}

bool lt_autotune_log() {
  const char* env = std::getenv("QLM_LT_AUTOTUNE_LOG");
  return env && *env && std::strcmp(env, "0") != 0;
}

std::vector<double> time_lt_candidates(Context& ctx, int n, const std::function<bool(int)>& launch, int reps) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> us(static_cast<size_t>(std::max(n, 0)), kInf);
  if (n <= 0) return us;
  // Twice the L2, rewritten before every timed launch, so no candidate finds the weights cached.
  const size_t flush_bytes = std::max<size_t>(2 * ctx.l2_bytes, size_t{64} << 20);
  Tensor flush = Tensor::empty({static_cast<int64_t>(flush_bytes)}, DType::U8, Device::cuda(ctx.device));
  EventSet ev;
  // starts[i][r], stops[i][r]; a refused candidate keeps no events.
  std::vector<std::vector<std::pair<cudaEvent_t, cudaEvent_t>>> marks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (!launch(i)) continue;  // warm-up; also tells whether cuBLASLt takes this candidate
    for (int r = 0; r < reps; ++r) {
      QLM_CUDA_CHECK(cudaMemsetAsync(flush.raw_data(), r & 0xff, flush_bytes, ctx.stream));
      cudaEvent_t start = ev.add(), stop = ev.add();
      QLM_CUDA_CHECK(cudaEventRecord(start, ctx.stream));
      if (!launch(i)) break;
      QLM_CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
      marks[static_cast<size_t>(i)].emplace_back(start, stop);
    }
  }
  QLM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  for (int i = 0; i < n; ++i) {
    auto& m = marks[static_cast<size_t>(i)];
    if (static_cast<int>(m.size()) != reps) continue;
    std::vector<double> t;
    for (auto [start, stop] : m) {
      float ms = 0;
      QLM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      t.push_back(1e3 * ms);
    }
    std::sort(t.begin(), t.end());
    us[static_cast<size_t>(i)] = t[t.size() / 2];
  }
  return us;
}

int fastest_candidate(const std::vector<double>& us) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(us.size()); ++i)
    if (us[static_cast<size_t>(i)] < std::numeric_limits<double>::infinity() &&
        (best < 0 || us[static_cast<size_t>(i)] < us[static_cast<size_t>(best)]))
      best = i;
  return best;
}

std::optional<cublasLtMatmulAlgo_t> tuned_algo(const std::string& key) {
  std::lock_guard lock(cache_mutex());
  auto it = cache().find(key);
  if (it == cache().end()) return std::nullopt;
  return it->second;
}

void remember_tuned_algo(const std::string& key, const cublasLtMatmulAlgo_t& algo) {
  constexpr size_t kMaxChoices = 4096;  // signatures x token counts kept; forgotten (re-tuned) when full
  std::lock_guard lock(cache_mutex());
  if (cache().size() >= kMaxChoices) cache().clear();
  cache()[key] = algo;
}

std::string describe_lt_algo(const cublasLtMatmulAlgo_t& algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto zero) {
    decltype(zero) v = zero;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
      return static_cast<int64_t>(-1);
    return static_cast<int64_t>(v);
  };
  return fmt::format(
      "id {} tile {} stages {} splitk {} swizzle {} cluster {} custom {}", get(CUBLASLT_ALGO_CONFIG_ID, int32_t{0}),
      get(CUBLASLT_ALGO_CONFIG_TILE_ID, uint32_t{0}), get(CUBLASLT_ALGO_CONFIG_STAGES_ID, uint32_t{0}),
      get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t{0}), get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t{0}),
      get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t{0}), get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, uint32_t{0}));
}

}  // namespace qlm::cuda
#endif
