// Swapped (y^T = w x^T): 128 weight rows x 128 tokens x 128 k, cooperative (both consumer warpgroups on one tile),
// clusters of 2 CTAs along the tokens sharing each weight tile through TMA multicast: torch's own choice beyond one
// wave of 64 x 128 tiles. Not chosen by the rule (measured within 2 % of cuBLASLt either way before the GEMM was
// launched with programmatic dependent launch after the quantizer); QLM_FP8_CUTLASS_CONFIG=swap128x128c12 forces it
// for that comparison (docs/fp8-kernel-notes.md).
#include "kernels/cuda/sm90a/fp8_cutlass_gemm_impl.cuh"

namespace qlm::cuda::fp8_cutlass {
QLM_FP8_CUTLASS_DEFINE(swap128x128c12, Shape<_128, _128, _128>, Shape<_1, _2, _1>,
                       cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                       cutlass::epilogue::TmaWarpSpecializedCooperative, true, Out)
}  // namespace qlm::cuda::fp8_cutlass
