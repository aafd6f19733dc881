#ifdef QLM_WITH_CUDA
#include "kernels/cuda/dense_lt_gemm.h"

#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "cuda/cublas_check.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/lt_algo_tuner.h"

namespace qlm::cuda {

namespace {
constexpr size_t kMaxPlans = 512;  // distinct M values kept; the cache is dropped when full
}

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // The heuristic's answers, best first (one unless the GEMM tunes); algo is one of them.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;  // algo final: tuned, taken from an earlier tuning, or tuning off
  bool bias_fused = false;
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

LtGemm::LtGemm(int device, LtGemmSpec spec)
    : ctx_(&context(device)), spec_(std::move(spec)), autotune_(lt_autotune_enabled(spec_.autotune)) {}
LtGemm::~LtGemm() = default;

std::unique_ptr<LtGemm::Plan> LtGemm::make_plan(int64_t M, const float* bias, const float* a_scale,
                                                const float* b_scale) const {
  const auto N = static_cast<uint64_t>(spec_.N), K = static_cast<uint64_t>(spec_.K);
  // Tries with the bias fused first, then without (cuBLASLt has no F32-bias epilogue for every
  // type combination).
  for (bool fuse : {bias != nullptr, false}) {
    auto p = std::make_unique<Plan>();
    QLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, spec_.compute, spec_.scale_type));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    QLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    QLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (fuse) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bias_type = CUDA_R_32F;
      QLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      QLM_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
      QLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (a_scale)
      QLM_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
    if (b_scale)
      QLM_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
    if (spec_.outer_vec_scales) {
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      // A cuBLAS without the mode rejects the attribute: no algorithm, the caller falls back.
      if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)) !=
              CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)) !=
              CUBLAS_STATUS_SUCCESS)
        return nullptr;
    }
    QLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, spec_.a_type, K, N, static_cast<int64_t>(K)));
    QLM_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p->b, spec_.b_type, K, static_cast<uint64_t>(M), static_cast<int64_t>(K)));
    QLM_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p->d, spec_.d_type, N, static_cast<uint64_t>(M), static_cast<int64_t>(N)));

    cublasLtMatmulPreference_t pref = nullptr;
    QLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = ctx_->lt_workspace_bytes;
    QLM_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(autotune_ ? kLtTuneCandidates : 1);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx_->cublas_lt, p->desc, p->a, p->b, p->d, p->d, pref,
                                                             static_cast<int>(results.size()), results.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      for (int i = 0; i < found; ++i)
        if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
          p->candidates.push_back(results[static_cast<size_t>(i)].algo);
    }
    if (!p->candidates.empty()) {
      p->algo = p->candidates.front();
      p->tuned = p->candidates.size() == 1;
      p->bias_fused = fuse;
      return p;
    }
    if (!fuse) break;
  }
  return nullptr;
}

LtGemm::Plan* LtGemm::plan(int64_t M, const float* bias, const float* a_scale, const float* b_scale) const {
  set_device(ctx_->device);  // the handles and the stream belong to this device
  const auto key = std::make_tuple(M, bias != nullptr, a_scale != nullptr, b_scale != nullptr);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  if (plans_.size() >= kMaxPlans) plans_.clear();
  return plans_.emplace(key, make_plan(M, bias, a_scale, b_scale)).first->second.get();
}

bool LtGemm::supported(int64_t M, const float* bias, const float* a_scale, const float* b_scale) const {
  std::lock_guard lock(mutex_);
  return plan(M, bias, a_scale, b_scale) != nullptr;
}

bool LtGemm::run(const void* w, const void* x, void* y, int64_t M, const float* bias, const float* a_scale,
                 const float* b_scale) const {
  std::lock_guard lock(mutex_);
  Plan* found = plan(M, bias, a_scale, b_scale);
  if (!found)
    fail("kernel.cublas_no_algo", {},
         "choose another --linear-backend (e.g. cuda_scaled_mm_simple), or report the shape",
         "cuBLASLt has no algorithm for the {} GEMM M={} N={} K={}", spec_.what, M, spec_.N, spec_.K);
  Plan& p = *found;
  // Pointers change from call to call; the plan's algorithm only assumed their (allocator) alignment.
  if (p.bias_fused)
    QLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (a_scale)
    QLM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
  if (b_scale)
    QLM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
  if (!p.tuned) tune(p, w, x, y, M, a_scale, b_scale);
  QLM_CUBLAS_CHECK(launch(p, p.algo, w, x, y));
  return p.bias_fused;
}

cublasStatus_t LtGemm::launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* w, const void* x,
                              void* y) const {
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const bool int_scale = spec_.scale_type == CUDA_R_32I;
  return cublasLtMatmul(ctx_->cublas_lt, p.desc, int_scale ? static_cast<const void*>(&alpha_i) : &alpha_f, w, p.a, x,
                        p.b, int_scale ? static_cast<const void*>(&beta_i) : &beta_f, y, p.d, y, p.d, &algo,
                        ctx_->lt_workspace, ctx_->lt_workspace_bytes, ctx_->stream);
}

void LtGemm::tune(Plan& p, const void* w, const void* x, void* y, int64_t M, const float* a_scale,
                  const float* b_scale) const {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  QLM_CUDA_CHECK(cudaStreamIsCapturing(ctx_->stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return;  // the heuristic's first; a later eager call tunes
  // Everything the candidate list and their speed depend on (the operands' values do not matter).
  const std::string key =
      fmt::format("dev{} cc{} a{} b{} d{} c{} s{} N{} K{} M{} bias{} as{} bs{} ov{}", ctx_->device, ctx_->capability,
                  static_cast<int>(spec_.a_type), static_cast<int>(spec_.b_type), static_cast<int>(spec_.d_type),
                  static_cast<int>(spec_.compute), static_cast<int>(spec_.scale_type), spec_.N, spec_.K, M,
                  p.bias_fused, a_scale != nullptr, b_scale != nullptr, spec_.outer_vec_scales);
  p.tuned = true;
  if (std::optional<cublasLtMatmulAlgo_t> known = tuned_algo(key)) {
    p.algo = *known;
    return;
  }
  const std::vector<double> us = time_lt_candidates(*ctx_, static_cast<int>(p.candidates.size()), [&](int i) {
    return launch(p, p.candidates[static_cast<size_t>(i)], w, x, y) == CUBLAS_STATUS_SUCCESS;
  });
  const int best = fastest_candidate(us);
  if (best >= 0) p.algo = p.candidates[static_cast<size_t>(best)];
  remember_tuned_algo(key, p.algo);
  if (lt_autotune_log()) {
    std::fprintf(stderr, "qlm: cuBLASLt tuning, %s M=%lld N=%lld K=%lld: %zu candidates, chose %d\n",
                 spec_.what.c_str(), static_cast<long long>(M), static_cast<long long>(spec_.N),
                 static_cast<long long>(spec_.K), p.candidates.size(), best);
    for (size_t i = 0; i < us.size(); ++i)
      std::fprintf(stderr, "qlm:   %2zu %9.2f us  %s\n", i, us[i], describe_lt_algo(p.candidates[i]).c_str());
  }
}

}  // namespace qlm::cuda
#endif
