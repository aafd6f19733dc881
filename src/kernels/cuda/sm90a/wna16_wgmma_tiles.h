// Entry points of the wgmma kernel's tile configurations (kWna16WgmmaTiles), one set per configuration,
// defined in the tile units wna16_wgmma_tiles_*.cu (QLM_WGMMA_DEFINE_TILE) and called by wna16_wgmma.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/wna16_fast_kernels.h"

namespace qlm::cuda {

// One GEMM call (launch_wna16_wgmma_gemm's arguments).
struct WgmmaCall {
  const Wna16FastArgs* w;
  const void* x;
  int64_t ldx, M;
  int tile, blocks, pair;
  int producers;  // producer warps issuing stages (1 to the tile's producer_warps; wna16_wgmma_producers)
  float* ws;
  unsigned* counters;
  bool acq_rel_fixup;  // bulk::arrive_tile_counter_acq_rel instead of fences (wna16_fixup_mode)
  bool natural_k;      // x in its own k order, the code words exchanged to it (one-group loop only; wna16_wgmma.h)
  bool staged_y;       // y through a ring slot in 16-byte pieces (wna16_wgmma.h)
  bool head_first;     // each block walks its split tiles' segments first (stream_k_walk.h)
  const float* bias;
  void* y;
  bool pdl;
  cudaStream_t stream;
};

#define QLM_WGMMA_DECLARE_TILE(I)                                     \
  bool wgmma_tile##I##_usable(const Wna16FastArgs& w);                \
  int wgmma_tile##I##_max_clusters(const Wna16FastArgs& w, int pair); \
  cudaError_t wgmma_tile##I##_launch(const WgmmaCall& c);
QLM_WGMMA_DECLARE_TILE(0)
QLM_WGMMA_DECLARE_TILE(1)
QLM_WGMMA_DECLARE_TILE(2)
QLM_WGMMA_DECLARE_TILE(3)
QLM_WGMMA_DECLARE_TILE(4)
QLM_WGMMA_DECLARE_TILE(5)
QLM_WGMMA_DECLARE_TILE(6)
QLM_WGMMA_DECLARE_TILE(7)
QLM_WGMMA_DECLARE_TILE(8)
QLM_WGMMA_DECLARE_TILE(9)
QLM_WGMMA_DECLARE_TILE(10)
QLM_WGMMA_DECLARE_TILE(11)
QLM_WGMMA_DECLARE_TILE(12)
#undef QLM_WGMMA_DECLARE_TILE

}  // namespace qlm::cuda
