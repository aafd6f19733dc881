// See w8a8_stream_gemm.h.
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/w8a8_stream_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/env_switch.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/scaled_mm_fp8_fast_kernels.h"

namespace qlm {
namespace {

// Tokens up to which the GEMM quantizes per-token activations itself by default. At one token it saves the
// quantizer's launch in a decode step (FP8 Llama-3-8B shape: 260.6 against 254.6 tokens/s on an H100); layer by layer
// the separate quantizer, launched early through PDL, is 0.5 µs faster at one token and 1.5-3 µs at four, where every
// block's reading of the whole rows for the absmax shows (docs/fp8-kernel-notes.md, session 49).
constexpr int64_t kFusedQuantDefaultMaxM = 1;

}  // namespace

W8A8StreamGemm::W8A8StreamGemm(const ScaledMMConfig& c, bool int8, const std::string& env_prefix, int64_t default_max_m)
    : c_(c), int8_(int8), max_m_(default_max_m) {
  if (const char* env = std::getenv((env_prefix + "_FAST_MAX_M").c_str()))
    max_m_ = std::max<int64_t>(0, std::atoll(env));
  if (const char* env = std::getenv((env_prefix + "_FAST_SPLITS").c_str())) force_splits_ = std::max(0, std::atoi(env));
  pdl_ = c_.capability >= 90 && env_switch_on((env_prefix + "_FAST_PDL").c_str());
  const bool per_token = c_.act == ActScheme::DynamicToken && c_.act_symmetric;
  fused_quant_max_m_ = per_token ? kFusedQuantDefaultMaxM : 0;
  if (const char* env = std::getenv((env_prefix + "_FUSED_QUANT_MAX_M").c_str()))
    fused_quant_max_m_ = per_token ? std::clamp<int64_t>(std::atoll(env), 0, cuda::kFp8FastFusedQuantMaxTokens) : 0;
  if (fused_quant_max_m_ > 0) scales_out_ = Tensor::empty({cuda::kFp8FastFusedQuantMaxTokens}, DType::F32, c_.device);
  for (int i = 0; i < 4; ++i) {
    int blocks = 0;
    QLM_CUDA_CHECK(cuda::fp8_fast_occupancy(8 << i, int8_, &blocks));
    occupancy_[i] = std::max(1, blocks);
  }
}

// Split count for `M` tokens by a small cost model: weight streaming at full bandwidth only when every
// resident-block slot has work (whole waves), a start-up latency per wave, plus the F32 partials' round trip and
// the reduction launch when K is split.
std::pair<int, int64_t> W8A8StreamGemm::plan(int64_t M, int sm_count) const {
  const int tile = cuda::fp8_fast_tile_tokens(M);
  const int occ = occupancy_[tile == 8 ? 0 : tile == 16 ? 1 : tile == 32 ? 2 : 3];
  const int64_t row_blocks = (c_.N_p + cuda::kFp8FastRowsPerBlock - 1) / cuda::kFp8FastRowsPerBlock;
  const int64_t steps = c_.K_p / cuda::kFp8FastStepK;
  if (force_splits_ > 0) {
    const int64_t per = (steps + std::min<int64_t>(force_splits_, steps) - 1) / std::min<int64_t>(force_splits_, steps);
    return {static_cast<int>((steps + per - 1) / per), per * cuda::kFp8FastStepK};
  }
  const double slots = static_cast<double>(std::max(1, sm_count) * occ);
  const double weight_s = static_cast<double>(c_.N_p) * static_cast<double>(c_.K_p) / 4.0e12;
  int best = 1;
  int64_t best_slice = steps;
  double best_t = 1e30;
  for (int64_t d = 1; d <= std::min<int64_t>(steps, 64); ++d) {
    const int64_t per = (steps + d - 1) / d;  // steps per slice
    const int64_t splits = (steps + per - 1) / per;
    if (splits != d) continue;  // the same plan as a smaller d
    const double blocks = static_cast<double>(row_blocks * splits);
    const double waves = std::ceil(blocks / slots);
    const double eff = blocks / (waves * slots) * (static_cast<double>(steps) / static_cast<double>(splits * per));
    double t = weight_s / eff + waves * 1.0e-6;  // + a block's start-up latency per wave
    if (splits > 1) t += 2.0 * static_cast<double>(M * c_.N_p * 4 * splits) / 3.0e12 + 2.0e-6;
    if (t < best_t * 0.98) {
      best_t = t;
      best = static_cast<int>(splits);
      best_slice = per;
    }
  }
  return {best, best_slice * cuda::kFp8FastStepK};
}

void W8A8StreamGemm::run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y,
                         const Tensor* bias) const {
  launch(w, &q.codes, nullptr, q.scales, M, y, bias);
}

std::string W8A8StreamGemm::path(int64_t M) const {
  if (quantizes_in_gemm(M)) return "streaming, quantizing in the GEMM";
  return serves(M) ? "streaming" : "";
}

bool W8A8StreamGemm::try_run_quantizing(const CudaScaledMMWeights& w, const Tensor& x, int64_t M, Tensor& y,
                                        const Tensor* bias) const {
  if (!quantizes_in_gemm(M) || reinterpret_cast<uintptr_t>(x.raw_data()) % 16 != 0) return false;
  launch(w, nullptr, &x, scales_out_, M, y, bias);
  return true;
}

void W8A8StreamGemm::launch(const CudaScaledMMWeights& w, const Tensor* codes, const Tensor* x_fused,
                            const Tensor& scales, int64_t M, Tensor& y, const Tensor* bias) const {
  cuda::Context& ctx = cuda::context(c_.device.index);
  const int64_t N = c_.N_p, K = c_.K_p;
  const size_t y_elem = dtype_size(c_.act_dtype);
  Tensor partial;
  Tensor sx = scales;  // a handle on the same storage, which a quantizing GEMM writes
  for (int64_t m0 = 0; m0 < M; m0 += cuda::kFp8FastMaxTokens) {
    const int64_t mc = std::min<int64_t>(cuda::kFp8FastMaxTokens, M - m0);
    const auto [splits, k_slice] = plan(mc, ctx.sm_count);
    cuda::Fp8FastGemmArgs a;
    a.int8 = int8_;
    a.w = reinterpret_cast<const uint8_t*>(w.codes.raw_data());
    if (x_fused) {
      a.x = reinterpret_cast<const char*>(x_fused->raw_data()) + static_cast<size_t>(m0 * K) * y_elem;
      a.sx_out = sx.data<float>() + m0;
    } else {
      a.xq = reinterpret_cast<const uint8_t*>(codes->raw_data()) + m0 * K;
      a.sx = sx.data<float>() + m0;
    }
    a.sw = w.scales.data<float>();
    a.sw_stride = c_.weight_scale == WeightScaleKind::Channel ? 1 : 0;
    a.bias = bias ? bias->data<float>() : nullptr;
    a.y = reinterpret_cast<char*>(y.raw_data()) + static_cast<size_t>(m0 * N) * y_elem;
    a.y_type = cuda_float_type(c_.act_dtype);
    a.M = mc;
    a.N = N;
    a.K = K;
    a.splits = splits;
    a.k_slice = k_slice;
    a.pdl = pdl_;
    if (splits > 1) {
      if (!partial.defined() || partial.numel() < splits * mc * N)
        partial = Tensor::empty({splits * mc * N}, DType::F32, c_.device);
      a.partial = partial.data<float>();
    }
    QLM_CUDA_CHECK(cuda::launch_fp8_fast_gemm(a, ctx.stream));
  }
}

}  // namespace qlm
#endif
