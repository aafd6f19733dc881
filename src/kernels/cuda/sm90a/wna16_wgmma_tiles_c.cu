// The wgmma kernels of tile configurations 6 and 9 (kWna16WgmmaTiles): the producer-warpgroup tiles 128 x 256 and
// 128 x 192 (the rule above 64 tokens).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(6)
QLM_WGMMA_DEFINE_TILE(9)
}  // namespace qlm::cuda
