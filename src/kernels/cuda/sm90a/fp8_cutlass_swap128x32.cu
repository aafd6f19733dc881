// Swapped (y^T = w x^T): 128 weight rows x 32 tokens x 128 k, cooperative (each of the two consumer
// warpgroups takes 64 of the rows). Twice the CTAs of swap128x64 for layers whose N/128 weight tiles
// alone do not fill the SMs.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_FP8_CUTLASS_DEFINE(swap128x32, Shape<_128, _32, _128>, Shape<_1, _1, _1>,
                       cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                       cutlass::epilogue::TmaWarpSpecializedCooperative, true, Out)
}  // namespace qlm::cuda::fp8_cutlass
