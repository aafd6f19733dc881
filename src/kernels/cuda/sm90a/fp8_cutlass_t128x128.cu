// 128 tokens x 128 weight rows x 128 k, cluster 2x1 (two CTAs along the tokens share each weight tile by TMA
// multicast), ping-pong.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_FP8_CUTLASS_DEFINE(t128x128, Shape<_128, _128, _128>, Shape<_2, _1, _1>,
                       cutlass::gemm::KernelTmaWarpSpecializedPingpong, cutlass::epilogue::TmaWarpSpecialized, false,
                       Out)
}  // namespace qlm::cuda::fp8_cutlass
