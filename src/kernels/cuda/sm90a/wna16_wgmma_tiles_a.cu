// The wgmma kernels of tile configurations 0, 1, 2, 10 (kWna16WgmmaTiles): 64 x 256, 64 x 128, 128 x 128 and 64 x 128
// with two producer warps (the rule's 33-64 tokens on layers under 1e8 weights: 64 x 128; the others when forced).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(0)
QLM_WGMMA_DEFINE_TILE(1)
QLM_WGMMA_DEFINE_TILE(2)
QLM_WGMMA_DEFINE_TILE(10)
}  // namespace qlm::cuda
