// See w8a8_cutlass_path.h.
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/w8a8_cutlass_path.h"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"

namespace qlm {
namespace {

// FP32 promotion every 4 wgmma k-steps (every 128-k tile, CUTLASS's default) for a configuration forced by
// <prefix>_CUTLASS_CONFIG.
constexpr int kForcedPromotionInterval = 4;

}  // namespace

W8A8CutlassPath::W8A8CutlassPath(const ScaledMMConfig& c, bool int8, const std::string& env_prefix, Tensor row_scales,
                                 bool pdl)
    : c_(c), int8_(int8), enabled_(runs_on(c)), pdl_(pdl), row_scales_(std::move(row_scales)) {
  const std::string config_switch = env_prefix + "_CUTLASS_CONFIG";
  if (const char* env = std::getenv(config_switch.c_str())) {
    const std::string want(env);
    std::string names = "off";
    for (int i = 0; i < static_cast<int>(cuda::Fp8CutlassConfig::kCount); ++i) {
      const auto config = static_cast<cuda::Fp8CutlassConfig>(i);
      names += std::string(", ") + cuda::fp8_cutlass_config_name(config);
      if (want == cuda::fp8_cutlass_config_name(config)) forced_config_ = config;
    }
    if (want == "off") enabled_ = false;
    if (want != "off" && !forced_config_)
      fail("kernel.config", {}, fmt::format("set {} to one of: {}; or unset it", config_switch, names),
           "{}={} names no CUTLASS configuration", config_switch, want);
  }
  // Tuning: QLM_FP8_PROMOTION=n promotes the FP8 accumulators every n wgmma k-steps (a multiple of 4) whatever the
  // configuration; unset, the rule's interval (or 4 for a forced one). INT8 sums are exact: nothing to promote.
  if (const char* env = std::getenv("QLM_FP8_PROMOTION"); env && !int8_) {
    const int n = std::atoi(env);
    if (n < 4 || n % 4 != 0)
      fail("kernel.config", {}, "set QLM_FP8_PROMOTION to a multiple of 4 (4, 8, 16, ...) or unset it",
           "QLM_FP8_PROMOTION={} is not a positive multiple of 4", env);
    forced_promotion_ = n;
  }
}

bool W8A8CutlassPath::runs_on(const ScaledMMConfig& c) {
  return cuda::fp8_cutlass_available() && c.capability == 90 && c.act_dtype != DType::F32;
}

std::optional<cuda::Fp8CutlassChoice> W8A8CutlassPath::choice(int64_t M) const {
  if (!enabled_) return std::nullopt;
  if (forced_config_) return cuda::Fp8CutlassChoice{*forced_config_, kForcedPromotionInterval};
  return cuda::fp8_cutlass_config_for(M, c_.N_p, cuda::context(c_.device.index).sm_count, int8_);
}

std::optional<std::string> W8A8CutlassPath::path(int64_t M) const {
  const std::optional<cuda::Fp8CutlassChoice> c = choice(M);
  if (!c) return std::nullopt;
  const char* name = cuda::fp8_cutlass_config_name(c->config);
  if (int8_) return fmt::format("cutlass {}", name);
  return fmt::format("cutlass {} p{}", name, forced_promotion_.value_or(c->promotion_interval));
}

bool W8A8CutlassPath::run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y,
                          const Tensor* bias) const {
  const std::optional<cuda::Fp8CutlassChoice> chosen = choice(M);
  if (!chosen) return false;
  cuda::Context& ctx = cuda::context(c_.device.index);
  cuda::Fp8CutlassArgs a;
  a.int8 = int8_;
  a.x = q.codes.raw_data();
  a.w = w.codes.raw_data();
  a.y = y.raw_data();
  a.y_f16 = c_.act_dtype == DType::F16;
  a.sx = q.scales.data<float>();
  a.sw = row_scales_.data<float>();
  a.bias = bias ? bias->data<float>() : nullptr;
  a.M = M;
  a.N = c_.N_p;
  a.K = c_.K_p;
  a.sm_count = ctx.sm_count;
  a.device = c_.device.index;
  a.pdl = pdl_;
  a.promotion_interval = forced_promotion_.value_or(chosen->promotion_interval);
  const cudaError_t e = cuda::fp8_cutlass_gemm(chosen->config, a, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream);
  if (e == cudaErrorNotSupported) return false;
  QLM_CUDA_CHECK(e);
  return true;
}

}  // namespace qlm
#endif
