// The INT8 W8A8 GEMM on tile configuration Swap128x64 (fp8_cutlass_gemm_impl.cuh), BF16 and F16 outputs.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_W8A8_CUTLASS_DEFINE(int8, int8_t, Swap128x64)
}  // namespace qlm::cuda::fp8_cutlass
