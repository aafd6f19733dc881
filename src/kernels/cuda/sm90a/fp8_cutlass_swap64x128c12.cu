// Swapped (y^T = w x^T): 64 weight rows x 128 tokens x 128 k, one consumer warpgroup per tile (its
// 64 x 128 accumulators and their FP32 promotion copies fit in registers), clusters of 2 CTAs along
// the tokens sharing each weight tile through TMA multicast. For many tokens on layers whose
// 64-row tiles still fit in about one wave.
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_FP8_CUTLASS_DEFINE(swap64x128c12, Shape<_64, _128, _128>, Shape<_1, _2, _1>,
                       cutlass::gemm::KernelTmaWarpSpecialized, cutlass::epilogue::TmaWarpSpecialized, true, Out)
}  // namespace qlm::cuda::fp8_cutlass
