// Config names and the configuration rule of kernels/cuda/fp8_cutlass_gemm.h, and the entry points of a
// build without the CUTLASS headers (every call answers cudaErrorNotSupported, so callers keep their other path).
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/fp8_cutlass_gemm.h"

namespace qlm::cuda {

const char* fp8_cutlass_config_name(Fp8CutlassConfig c) {
  switch (c) {
    case Fp8CutlassConfig::kSwap128x32: return "swap128x32";
    case Fp8CutlassConfig::kSwap128x64: return "swap128x64";
    case Fp8CutlassConfig::kSwap64x128C12: return "swap64x128c12";
    case Fp8CutlassConfig::kSwap128x128C12: return "swap128x128c12";
    case Fp8CutlassConfig::kCount: break;
  }
  return "?";
}

// Up to 64 tokens CUTLASS always (1.0-1.45x torch there): 32-token tiles up to 32 tokens and while 64-token ones
// would leave most SMs idle, 64-token tiles up to 64 and above while their tiles fit well inside one wave. Above 128
// tokens, 64 x 128 tiles in 2-CTA clusters, promoting every 16 k-steps, while their tiles fit in one wave (narrow
// layers: 1.2-1.3x cuBLASLt at 256 tokens on N = 4096); otherwise cuBLASLt (every larger tile measured within 2 % of
// it at best). INT8: cuBLASLt's INT8 GEMM took 1.1-2.2x the time of 128 x 128 tiles in 2-CTA clusters wherever the
// FP8 rule leaves M to cuBLASLt (every Llama-3 8B / 70B layer at 256 and 1024 tokens, H100; docs/fp8-kernel-notes.md,
// session 50), and 1.0-1.3x that of the FP8 rule's tiles from 17 to 64 tokens. Up to 128 tokens INT8 keeps the
// 64-token tiles: there a cluster along the tokens has one 128-token tile to share, and swap128x64 took 0.74-0.79x
// its time at 128 tokens on the 8B / 70B layers that took it (8192 x 57344 202.3 vs 257.6 µs), 0.70-0.97x at 96 but
// for 8192 x 57344 (259.0 vs 247.1 in one run, 248.9 both in another; H100, docs/fp8-kernel-notes.md, session 53).
std::optional<Fp8CutlassChoice> fp8_cutlass_config_for(int64_t M, int64_t N, int sm_count, bool int8) {
  using C = Fp8CutlassConfig;
  const int64_t tiles = (N + 127) / 128 * ((M + 63) / 64);
  if (M <= 32 || (M <= 64 && 8 * tiles <= 3 * sm_count)) return Fp8CutlassChoice{C::kSwap128x32, 4};
  if (M <= 64 || 4 * tiles <= 3 * sm_count || (int8 && M <= 128)) return Fp8CutlassChoice{C::kSwap128x64, 4};
  if (M > 128 && (N + 63) / 64 * ((M + 127) / 128) <= sm_count) return Fp8CutlassChoice{C::kSwap64x128C12, 16};
  if (int8) return Fp8CutlassChoice{C::kSwap128x128C12, 4};
  return std::nullopt;
}

#ifndef QLM_WITH_CUTLASS
bool fp8_cutlass_available() { return false; }
cudaError_t fp8_cutlass_gemm(Fp8CutlassConfig, const Fp8CutlassArgs&, void*, size_t, cudaStream_t) {
  return cudaErrorNotSupported;
}
#endif

}  // namespace qlm::cuda
#endif
