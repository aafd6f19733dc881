// The wgmma kernels of tile configurations 7 and 8 (kWna16WgmmaTiles): the 64-token producer-warpgroup tiles
// 64 x 512 (only when forced, QLM_WGMMA_TILE=7) and 64 x 384 (the rule at 33-64 tokens on large layers).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(7)
QLM_WGMMA_DEFINE_TILE(8)
}  // namespace qlm::cuda
