// The wgmma kernels of tile configurations 6, 7, 8, 9 (kWna16WgmmaTiles): the producer-warpgroup tiles 128 x 256, 64 x
// 512, 64 x 384 and 128 x 192.
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(6)
QLM_WGMMA_DEFINE_TILE(7)
QLM_WGMMA_DEFINE_TILE(8)
QLM_WGMMA_DEFINE_TILE(9)
}  // namespace qlm::cuda
