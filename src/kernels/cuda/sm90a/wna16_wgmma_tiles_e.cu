// The wgmma kernels of tile configuration 12 (kWna16WgmmaTiles): the producer-warpgroup tile of 256 tokens x 128
// columns (forced only, QLM_WGMMA_TILE=12, until measured).
#include "kernels/cuda/sm90a/wna16_wgmma_kernel.cuh"

namespace qlm::cuda {
QLM_WGMMA_DEFINE_TILE(12)
}  // namespace qlm::cuda
