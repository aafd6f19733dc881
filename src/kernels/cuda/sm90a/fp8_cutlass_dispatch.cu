// Entry points of kernels/cuda/fp8_cutlass_gemm.h when CUTLASS is compiled in: config -> instance.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda {

bool fp8_cutlass_available() { return true; }

cudaError_t fp8_cutlass_gemm(Fp8CutlassConfig c, const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  using namespace fp8_cutlass;
  if (a.M <= 0 || a.N <= 0 || a.K <= 0 || a.K % 16 != 0 || a.N % 8 != 0 ||
      (!a.int8 && (a.promotion_interval < 4 || a.promotion_interval % 4 != 0)))
    return cudaErrorNotSupported;
#define QLM_W8A8_CUTLASS_CASE(config)                                        \
  case Fp8CutlassConfig::k##config:                                          \
    return a.int8 ? run_int8_##config(a, workspace, workspace_bytes, stream) \
                  : run_fp8_##config(a, workspace, workspace_bytes, stream);
  switch (c) {
    QLM_W8A8_CUTLASS_CASE(Swap128x32)
    QLM_W8A8_CUTLASS_CASE(Swap128x64)
    QLM_W8A8_CUTLASS_CASE(Swap64x128C12)
    QLM_W8A8_CUTLASS_CASE(Swap128x128C12)
    case Fp8CutlassConfig::kCount: break;
  }
#undef QLM_W8A8_CUTLASS_CASE
  return cudaErrorNotSupported;
}

}  // namespace qlm::cuda
