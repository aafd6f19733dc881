// The wgmma kernels of tile configurations 3, 4, 5 and 11 (kWna16WgmmaTiles): 16 x 256, 32 x 256, 16 x 128 and 32 x 256
// with two producer warps (the small-token tiles, with late scaling).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(3)
QLM_WGMMA_DEFINE_TILE(4)
QLM_WGMMA_DEFINE_TILE(5)
QLM_WGMMA_DEFINE_TILE(11)
}  // namespace qlm::cuda
