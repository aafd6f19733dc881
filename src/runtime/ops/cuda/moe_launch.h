// Plain launchers of the mixture-of-experts routing kernels on CUDA (C++17, no qlm headers): the
// softmax top-k router, the grouping of slots by expert (counts, prefix sums, permutation), both in one
// launch for few tokens, the row gather, the weighted combine back into token order and the Qwen2-MoE
// shared-expert gate. Every kernel is launched with programmatic dependent launch (elem.cuh).
// A slot is token * top_k + j. "Rows" are slots in expert order: expert e owns rows
// [offsets[e], offsets[e + 1]); its tiles of `tile_m` rows are [tile_offsets[e], tile_offsets[e + 1]).
// Every launcher enqueues on `stream` and returns the launch status.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/ops/cuda/launch.h"

namespace qlm::ops::cu {

// The router supports up to this many experts and top-k up to kMoeMaxTopK.
inline constexpr int64_t kMoeMaxExperts = 1024;
inline constexpr int64_t kMoeMaxTopK = 32;

// Per token: softmax over logits [T, E] (math in double, as select_experts; with `renormalize` the softmax's
// denominator, which cancels, is left out), the top_k experts (ties: the lower id), their weights (divided by their
// sum with `renormalize`). ids / weights: [T * top_k].
cudaError_t launch_moe_route(const void* logits, ElemType type, int64_t tokens, int64_t experts, int64_t top_k,
                             bool renormalize, int32_t* ids, float* weights, cudaStream_t stream);

// The tiles of `tile_m` rows that `slots` rows spread over `experts` experts can take: each active expert's rows
// rounded up to whole tiles, at most ceil(slots / tile_m) plus one per active expert (min(slots, experts) of them).
inline constexpr int64_t moe_max_tiles(int64_t slots, int64_t experts, int64_t tile_m) {
  return (slots + tile_m - 1) / tile_m + (slots < experts ? slots : experts);
}

// Groups the T * top_k slots by expert in one block: offsets / tile_offsets [E + 1],
// row_token [slots] (the token of every row), slot_row [slots] (the row of every slot), row_expert [slots]
// (the expert of every row) and tile_expert [tiles] (the expert of every tile, tiles = tile_offsets[E]: at most
// moe_max_tiles(slots, E, tile_m); entries past it are left as they were). Rows of one expert are in no particular
// order (every consumer is independent of it).
cudaError_t launch_moe_align(const int32_t* ids, int64_t slots, int64_t top_k, int64_t experts, int64_t tile_m,
                             int32_t* offsets, int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row,
                             int32_t* row_expert, int32_t* tile_expert, cudaStream_t stream);

// launch_moe_route then launch_moe_align in one block (one launch instead of two), for 1 to
// kMoeRouteAlignMaxTokens tokens: the same ids, weights, offsets, tile_offsets and tile_expert, and rows grouped
// the same way.
inline constexpr int64_t kMoeRouteAlignMaxTokens = 32;
cudaError_t launch_moe_route_align(const void* logits, ElemType type, int64_t tokens, int64_t experts, int64_t top_k,
                                   bool renormalize, int64_t tile_m, int32_t* ids, float* weights, int32_t* offsets,
                                   int32_t* tile_offsets, int32_t* row_token, int32_t* slot_row, int32_t* row_expert,
                                   int32_t* tile_expert, cudaStream_t stream);

// The router folded into launch_moe_route_align, for 1 to kMoeRouterMaxTokens tokens (decode): logits = x · wᵀ
// (x [tokens, hidden] and the router's weight w [experts, hidden] in `type`, F16 or BF16, 16-byte aligned rows
// with hidden a multiple of 8; F32 sums rounded to `type`, as the router's linear layer rounds its output), then
// the same routing and grouping, in one cluster of kMoeRouterClusterBlocks blocks (sm_90): every block multiplies
// a share of the (expert, part of hidden) rows, block 0 adds the parts in a fixed order and routes. The weight
// rows are requested before the wait for the previous kernel (nothing earlier writes them). Outputs as
// launch_moe_route_align. moe_router_route_align_ok says whether the arguments fit it.
inline constexpr int64_t kMoeRouterMaxTokens = 4;
inline constexpr int kMoeRouterClusterBlocks = 8;
struct MoeRouterRouteAlignArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  ElemType type = ElemType::BF16;
  int64_t tokens = 0, hidden = 0, experts = 0, top_k = 0;
  bool renormalize = false;
  int64_t tile_m = 1;
  int32_t* ids = nullptr;
  float* weights = nullptr;
  int32_t *offsets = nullptr, *tile_offsets = nullptr, *row_token = nullptr, *slot_row = nullptr, *row_expert = nullptr,
          *tile_expert = nullptr;
  // Investigation only (tests): where set, thread 0 of block 0 writes the SM clock (clock64) at the kernel's phases:
  // [0] entry, [1] past the wait, [2] its warp's GEMV rows done, [3] the cluster's partial sums in block 0, [4] its
  // logits added, [5] every logit added, [6] the tokens routed, [7] grouped; token 0's routing warp (lane 0) past its
  // steps: [8] the candidates loaded, [9] the top-k rounds, [10] the softmax sum (not renormalising), [11] the
  // probabilities, [12] their sum, [13] the weights stored.
  int64_t* probe = nullptr;
};
// Shapes and types only (no pointers): what the caller checks before choosing this path.
bool moe_router_route_align_ok(ElemType type, int64_t tokens, int64_t hidden, int64_t experts, int64_t top_k);
cudaError_t launch_moe_router_route_align(const MoeRouterRouteAlignArgs& a, cudaStream_t stream);

// out[r, :] = x[row_token[r], :] for `rows` rows of `width` elements of `type`.
cudaError_t launch_moe_gather_rows(const void* x, ElemType type, const int32_t* row_token, int64_t rows, int64_t width,
                                   void* out, cudaStream_t stream);

// y[t, h] = sum_j weights[t*k + j] * sum_s rows[s][slot_row[t*k + j], h]: `splits` partial row
// blocks of rows_total x width elements of `type` (split s at rows + s * rows_total * width); y F32 [T, width].
cudaError_t launch_moe_combine(const void* rows, ElemType type, int splits, int64_t rows_total, const int32_t* slot_row,
                               const float* weights, int64_t tokens, int64_t top_k, int64_t width, float* y,
                               cudaStream_t stream);

// y[t, :] += sigmoid(gate[t]) * shared[t, :]: y F32 [T, width], shared [T, width] and gate [T] in their types.
cudaError_t launch_moe_add_gated(float* y, const void* shared, ElemType shared_type, const void* gate,
                                 ElemType gate_type, int64_t tokens, int64_t width, cudaStream_t stream);

}  // namespace qlm::ops::cu
