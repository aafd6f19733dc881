// The wgmma kernels of tile configuration 12 (kWna16WgmmaTiles): the producer-warpgroup tile of 256 tokens x 128
// columns (the rule on layers of >= 2e8 weights above 128 tokens where 256-token tiles pad no more, notes v7r).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(12)
}  // namespace qlm::cuda
