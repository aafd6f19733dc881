// Config names for kernels/cuda/fp8_cutlass_gemm.h, and the entry points of a
// build without the CUTLASS headers (every call answers cudaErrorNotSupported,
// so callers keep their other path).
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

#ifndef QLM_WITH_CUTLASS
bool fp8_cutlass_available() { return false; }
cudaError_t fp8_cutlass_gemm(Fp8CutlassConfig, const Fp8CutlassArgs&, void*, size_t, cudaStream_t) {
  return cudaErrorNotSupported;
}
#endif

}  // namespace qlm::cuda
#endif
