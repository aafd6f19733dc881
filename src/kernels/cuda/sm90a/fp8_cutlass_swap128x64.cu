// Swapped (y^T = w x^T): 128 weight rows x 64 tokens x 128 k, cooperative: both consumer warpgroups
// work on one tile, so a CTA that gets one tile keeps both busy (ping-pong left one idle there).
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_FP8_CUTLASS_DEFINE(swap128x64, Shape<_128, _64, _128>, Shape<_1, _1, _1>,
                       cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                       cutlass::epilogue::TmaWarpSpecializedCooperative, true, Out)
}  // namespace qlm::cuda::fp8_cutlass
