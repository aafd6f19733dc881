// Entry points of kernels/cuda/fp8_cutlass_gemm.h when CUTLASS is compiled in: config -> instance.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda {

bool fp8_cutlass_available() { return true; }

cudaError_t fp8_cutlass_gemm(Fp8CutlassConfig c, const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  using namespace fp8_cutlass;
  if (a.M <= 0 || a.N <= 0 || a.K <= 0 || a.K % 16 != 0 || a.N % 8 != 0 ||
      a.promotion_interval < 4 || a.promotion_interval % 4 != 0) return cudaErrorNotSupported;
  switch (c) {
    case Fp8CutlassConfig::kSwap128x32: return run_swap128x32(a, workspace, workspace_bytes, stream);
    case Fp8CutlassConfig::kSwap128x64: return run_swap128x64(a, workspace, workspace_bytes, stream);
    case Fp8CutlassConfig::kSwap64x128C12: return run_swap64x128c12(a, workspace, workspace_bytes, stream);
    case Fp8CutlassConfig::kSwap128x128C12: return run_swap128x128c12(a, workspace, workspace_bytes, stream);
    case Fp8CutlassConfig::kCount: break;
  }
  return cudaErrorNotSupported;
}

}  // namespace qlm::cuda
