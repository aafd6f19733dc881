// The wgmma GEMM of `cuda_wna16_fast` for 4-bit weights (declarations and layout: wna16_wgmma.h): the x
// permutation and the dispatch to the tile configurations (kernel: wna16_wgmma_kernel.cuh; one unit per
// group of tiles, wna16_wgmma_tiles_*.cu). Compiled for sm_90a only, with the other kernels of this directory.
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>

#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/sm90a/wna16_wgmma_tiles.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wna16_wgmma.h"

namespace qlm::cuda {
namespace {

// x in the MMA's k order (see the header): packed row j of xp is row src(j) of x, src permuting each
// 16-row k-tile (MMA slots 2t + e <- rows 4t + e, slots 8 + 2t + e <- rows 4t + 2 + e), composed with
// row_source. Identity rows and 16-byte aligned x: one thread per (token, k-tile) moves 32 bytes.
__global__ void permute_x_kernel(const uint16_t* __restrict__ x, int64_t M, int64_t ldx,
                                 const int32_t* __restrict__ row_source, int64_t rows, uint16_t* __restrict__ xp) {
  pdl_enter();  // x is the previous kernel's output; xp may still be read by an earlier GEMM
  const int64_t k_tiles = rows / 16;
  if (row_source == nullptr) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * k_tiles;
         i += int64_t{gridDim.x} * blockDim.x) {
      const int64_t m = i / k_tiles, kt = i - m * k_tiles;
      const uint4* src = reinterpret_cast<const uint4*>(x + m * ldx + kt * 16);
      const uint4 lo = src[0], hi = src[1];
      uint4* dst = reinterpret_cast<uint4*>(xp + m * rows + kt * 16);
      dst[0] = make_uint4(lo.x, lo.z, hi.x, hi.z);
      dst[1] = make_uint4(lo.y, lo.w, hi.y, hi.w);
    }
    return;
  }
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * rows; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / rows, j = i - m * rows;
    const int s = static_cast<int>(j & 15), t = (s & 7) >> 1;
    const int32_t r = row_source[(j & ~int64_t{15}) + 4 * t + (s & 1) + (s >= 8 ? 2 : 0)];
    xp[i] = r >= 0 ? x[m * ldx + r] : uint16_t{0};
  }
}

int64_t stages_per_tile(const Wna16FastArgs& w) {
  return (w.k_tiles + kWna16WgmmaStageTiles - 1) / kWna16WgmmaStageTiles;
}

}  // namespace

bool wna16_wgmma_built() { return true; }

cudaError_t launch_wna16_wgmma_permute_x(const void* x, int64_t M, int64_t ldx, const int32_t* row_source, int64_t rows,
                                         void* xp, bool pdl, cudaStream_t stream) {
  const bool vectors = row_source == nullptr;
  if (vectors && (reinterpret_cast<uintptr_t>(x) % 16 != 0 || ldx % 8 != 0)) return cudaErrorInvalidValue;
  const int64_t work = vectors ? M * (rows / 16) : M * rows;
  const int threads = 256;
  const int64_t blocks = std::clamp<int64_t>((work + threads - 1) / threads, 1, 65535);
  const cudaError_t e =
      launch_pdl_if(pdl, permute_x_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream,
                    static_cast<const uint16_t*>(x), M, ldx, row_source, rows, static_cast<uint16_t*>(xp));
  return e != cudaSuccess ? e : cudaGetLastError();
}

bool wna16_wgmma_usable(const Wna16FastArgs& w, int tile) {
  if (w.bits != 4 || !tensor_maps_available()) return false;
  static_assert(std::size(kWna16WgmmaTiles) == 13);
  switch (tile) {
    case 0: return wgmma_tile0_usable(w);
    case 1: return wgmma_tile1_usable(w);
    case 2: return wgmma_tile2_usable(w);
    case 3: return wgmma_tile3_usable(w);
    case 4: return wgmma_tile4_usable(w);
    case 5: return wgmma_tile5_usable(w);
    case 6: return wgmma_tile6_usable(w);
    case 7: return wgmma_tile7_usable(w);
    case 8: return wgmma_tile8_usable(w);
    case 9: return wgmma_tile9_usable(w);
    case 10: return wgmma_tile10_usable(w);
    case 11: return wgmma_tile11_usable(w);
    case 12: return wgmma_tile12_usable(w);
    default: return false;
  }
}

// m-tiles x groups of `pair` column tiles: the kernel's work units.
int64_t wgmma_units(const Wna16FastArgs& w, int64_t M, int tile, int pair) {
  const Wna16WgmmaTile& c = kWna16WgmmaTiles[tile];
  const int64_t wn = c.consumer_warpgroups * c.blocks_per_wg;
  const int64_t m_tiles = (M + c.tokens - 1) / c.tokens, n_tiles = (w.n_blocks + wn - 1) / wn;
  return m_tiles * ((n_tiles + pair - 1) / pair);
}

int64_t wna16_wgmma_stage_count(const Wna16FastArgs& w, int64_t M, int tile, int pair) {
  return wgmma_units(w, M, tile, pair) * stages_per_tile(w);
}

int64_t wna16_wgmma_tile_count(const Wna16FastArgs& w, int64_t M, int tile, int pair) {
  return wgmma_units(w, M, tile, pair) * pair;
}

int64_t wna16_wgmma_max_segments(const Wna16FastArgs& w, int64_t M, int tile, int blocks, int pair) {
  const int64_t P = stages_per_tile(w), T = wna16_wgmma_stage_count(w, M, tile, pair);
  const int64_t G = std::max(1, blocks / std::max(1, pair));
  return (P * G + T - 1) / T + 1;
}

int wna16_wgmma_max_clusters(const Wna16FastArgs& w, int tile, int pair) {
  switch (tile) {
    case 0: return wgmma_tile0_max_clusters(w, pair);
    case 1: return wgmma_tile1_max_clusters(w, pair);
    case 2: return wgmma_tile2_max_clusters(w, pair);
    case 3: return wgmma_tile3_max_clusters(w, pair);
    case 4: return wgmma_tile4_max_clusters(w, pair);
    case 5: return wgmma_tile5_max_clusters(w, pair);
    case 6: return wgmma_tile6_max_clusters(w, pair);
    case 7: return wgmma_tile7_max_clusters(w, pair);
    case 8: return wgmma_tile8_max_clusters(w, pair);
    case 9: return wgmma_tile9_max_clusters(w, pair);
    case 10: return wgmma_tile10_max_clusters(w, pair);
    case 11: return wgmma_tile11_max_clusters(w, pair);
    case 12: return wgmma_tile12_max_clusters(w, pair);
    default: return 0;
  }
}

cudaError_t launch_wna16_wgmma_gemm(const Wna16FastArgs& w, const void* x, int64_t ldx, int64_t M, int tile, int blocks,
                                    int pair, int producers, float* ws, unsigned* counters, bool acq_rel_fixup,
                                    bool natural_k, bool staged_y, bool head_first, const float* bias, void* y,
                                    bool pdl, cudaStream_t stream) {
  if (w.bits != 4 || (pair != 1 && pair != 2) || blocks % pair != 0 || producers < 1) return cudaErrorInvalidValue;
  if (staged_y && !wna16_wgmma_can_stage_y(w, y)) return cudaErrorInvalidValue;
  const WgmmaCall c{.w = &w,
                    .x = x,
                    .ldx = ldx,
                    .M = M,
                    .tile = tile,
                    .blocks = blocks,
                    .pair = pair,
                    .producers = producers,
                    .ws = ws,
                    .counters = counters,
                    .acq_rel_fixup = acq_rel_fixup,
                    .natural_k = natural_k,
                    .staged_y = staged_y,
                    .head_first = head_first,
                    .bias = bias,
                    .y = y,
                    .pdl = pdl,
                    .stream = stream};
  switch (tile) {
    case 0: return wgmma_tile0_launch(c);
    case 1: return wgmma_tile1_launch(c);
    case 2: return wgmma_tile2_launch(c);
    case 3: return wgmma_tile3_launch(c);
    case 4: return wgmma_tile4_launch(c);
    case 5: return wgmma_tile5_launch(c);
    case 6: return wgmma_tile6_launch(c);
    case 7: return wgmma_tile7_launch(c);
    case 8: return wgmma_tile8_launch(c);
    case 9: return wgmma_tile9_launch(c);
    case 10: return wgmma_tile10_launch(c);
    case 11: return wgmma_tile11_launch(c);
    case 12: return wgmma_tile12_launch(c);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace qlm::cuda
