// W8A8 GEMM for Hopper (sm_90a) built on CUTLASS's TMA + wgmma warp-specialised kernels, FP8 e4m3 codes (FP32
// accumulation with promotion) or INT8 codes (Fp8CutlassArgs::int8: exact int32 accumulation):
// y[m, n] = (sum_k x[m, k] w[n, k]) * sx[m] * sw[n] + bias[n], BF16 or F16 output. Compiled only
// when the CUTLASS headers were found (QLM_WITH_CUTLASS); callers check fp8_cutlass_available() and
// keep another path for everything else.
//
// Invariants the caller guarantees: x [M, K] and w [N, K] row-major 8-bit codes on the device, K % 16 == 0
// (16-byte TMA rows), N % 8 == 0 (16-byte output rows), sx F32 [M], sw F32 [N], bias F32 [N] or
// null, y [M, N] row-major.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace qlm::cuda {

// Tile configurations, each a separate kernel instantiation. Both run the swapped problem
// y^T = w x^T, so the weight rows fill the wgmma tile's 128 rows and the few tokens its N side, and
// both are cooperative (the two consumer warpgroups share a tile) and accumulate with FP32
// promotion: the FP8 "fast accumulation" schedules lost 0.3 % relative accuracy at K = 14336, over
// the W8A8 tolerance. Measured on the H200 and dropped: ping-pong (one warpgroup per tile; idle
// warpgroups when tiles are few), 128 x 128 / 128 x 256 token tiles (slower than cuBLASLt from
// 128 tokens on with promotion every k-tile; with 2-CTA clusters and promotion every 16 k-steps
// within 2 % of it either way; the cluster one is back, forced-only, for a comparison with programmatic dependent
// launch), stream-K (docs/fp8-kernel-notes.md).
enum class Fp8CutlassConfig : int {
  kSwap128x32,  // 128 weight rows x 32 tokens x 128 k
  kSwap128x64,  // 128 weight rows x 64 tokens x 128 k
  // 64 weight rows x 128 tokens, one consumer warpgroup (not cooperative), clusters of two CTAs
  // along the tokens sharing each weight tile (TMA multicast): many tokens on narrow layers.
  kSwap64x128C12,
  // 128 weight rows x 128 tokens, cooperative, 2-CTA clusters along the tokens: INT8 above 128 tokens where FP8 leaves
  // M to cuBLASLt; for FP8 forced only (QLM_FP8_CUTLASS_CONFIG), as it measured within -3 / +4 % of cuBLASLt there.
  kSwap128x128C12,
  kCount,
};
const char* fp8_cutlass_config_name(Fp8CutlassConfig c);

struct Fp8CutlassArgs {
  bool int8 = false;            // INT8 codes (s8 x s8 -> s32) instead of FP8 e4m3; promotion_interval unused
  const void* x = nullptr;      // [M, K] e4m3 (or INT8)
  const void* w = nullptr;      // [N, K] e4m3 (or INT8)
  void* y = nullptr;            // [M, N] BF16 or F16
  bool y_f16 = false;           // false: BF16
  const float* sx = nullptr;    // [M]
  const float* sw = nullptr;    // [N]
  const float* bias = nullptr;  // [N] or null
  int64_t M = 0, N = 0, K = 0;
  int sm_count = 0;
  int device = 0;
  bool pdl = false;  // programmatic dependent launch (waits on the previous kernel's trigger)
  // wgmma k-steps (32 k each) accumulated in the tensor core's FP8 accumulator before each
  // promotion into the FP32 accumulator; a multiple of 4 (one 128-k tile). Every promotion drains
  // the wgmma pipeline, so a longer interval runs faster and rounds a little more.
  int promotion_interval = 4;
};

// The configuration (and FP32 promotion interval, FP8 only) for M tokens (M > 16) on an N-row layer of a
// compute-capability-9.0 GPU with sm_count SMs, or none: the caller's cuBLASLt GEMM runs. The FP8 rule of
// docs/fp8-kernel-notes.md (H200 sweeps of scripts/bench_fp8_configs.sh); INT8 (`int8`) takes the same tiles where
// FP8 takes CUTLASS and swap128x128c12 where FP8 leaves M to cuBLASLt (H100, session 50: cuBLASLt's INT8 GEMM is
// 1.1-2.2x slower there).
struct Fp8CutlassChoice {
  Fp8CutlassConfig config;
  int promotion_interval;
};
std::optional<Fp8CutlassChoice> fp8_cutlass_config_for(int64_t M, int64_t N, int sm_count, bool int8 = false);

// True when the CUTLASS kernels were compiled into this build.
bool fp8_cutlass_available();
// Runs config `c`; returns cudaSuccess or the launch error (cudaErrorNotSupported when CUTLASS
// rejects the problem, e.g. misaligned shapes, or was not compiled in; cudaErrorInvalidValue when
// `workspace_bytes` is less than the configuration needs, none of them needs any today).
cudaError_t fp8_cutlass_gemm(Fp8CutlassConfig c, const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);

}  // namespace qlm::cuda
