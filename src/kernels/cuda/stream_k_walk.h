// The order in which a block of a stream-K grid walks its share of k-stages: host and device, so the CPU tests can
// check it (tests/kernels/stream_k_walk_test.cc) and the producer and consumers of a kernel walk the same sequence.
//
// A block owns stages [q_begin, q_end) of the sequence of all tiles' stages, tile after tile (per_tile stages a tile).
// Its share starts inside a tile (that tile's tail: the block before it has the head) or on a boundary, then covers
// whole tiles, then may end inside a tile (that tile's head). Of a split tile's segments the last to finish sums the
// partial slots; walked in order, that is the head, at the end of every block's share, so every block ends with a
// fix-up whose other slot was written at the start of the kernel (out of L2 by then) — the tiles' y come last of all.
// Head first walks [head, q_end) first, then [q_begin, head): both segments of a split tile are done early, their
// fix-up reads partials written moments before, and every block ends on whole tiles. The walk only reorders a block's
// own stages: the same segments, slots and sums (slot order), so the same bits.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QLM_WALK_HOST_DEVICE __host__ __device__
#else
#define QLM_WALK_HOST_DEVICE
#endif

namespace qlm::cuda {

// The first stage a block walks: the start of the head segment its share ends with, where head_first is set and that
// share ends inside a tile it does not start in; else q_begin (the share in order).
QLM_WALK_HOST_DEVICE constexpr int64_t stream_k_walk_first(int64_t q_begin, int64_t q_end, int64_t per_tile,
                                                           bool head_first) {
  if (!head_first || per_tile <= 0) return q_begin;
  const int64_t head = q_end / per_tile * per_tile;  // the last tile boundary at or before q_end
  return head > q_begin && head < q_end ? head : q_begin;
}

// The stage at position i (0 <= i < q_end - q_begin) of the walk that starts at `first`: [first, q_end), then
// [q_begin, first).
QLM_WALK_HOST_DEVICE constexpr int64_t stream_k_walk_stage(int64_t q_begin, int64_t q_end, int64_t first, int64_t i) {
  return i < q_end - first ? first + i : q_begin + (i - (q_end - first));
}

}  // namespace qlm::cuda

#undef QLM_WALK_HOST_DEVICE
