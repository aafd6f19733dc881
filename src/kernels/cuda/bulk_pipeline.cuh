// Device helpers of the producer/consumer pipelines in shared memory (sm_90: mbarriers with
// transaction counts, `cp.async.bulk` global -> shared copies), of the stream-K work split and of the
// producers' per-stage copies, shared by the stream (wna16_stream_kernels.cu) and wgmma
// (sm90a/wna16_wgmma_kernel.cuh) kernels of cuda_wna16_fast.
// The mbarrier and bulk-copy instructions need sm_90: compiled for an older device (or in the host
// pass) those helpers are empty, so callers must run them on sm_90 only.
#pragma once

#include <cstdint>

#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ring_schedule.h"

namespace qlm::cuda::bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QLM_BULK_SM90 1
#endif

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#ifdef QLM_BULK_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Arrives once and expects `bytes` more of transactions in the current phase.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#ifdef QLM_BULK_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#ifdef QLM_BULK_SM90
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// The same at cluster scope: also acquires what threads of other blocks of the cluster released with their arrivals
// (mbar_arrive_peer).
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// Arrives once on the mbarrier at the same shared-memory offset as `bar` in block `rank` of the cluster, releasing
// this thread's earlier accesses at cluster scope.
__device__ __forceinline__ void mbar_arrive_peer(uint32_t bar, uint32_t rank) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
#endif
}
// This block's rank in its cluster (0 without a cluster launch).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#ifdef QLM_BULK_SM90
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
// Every non-exited thread of the cluster: what each did before is visible to all after (a no-op cost-wise
// without a cluster launch, but every thread of the block must reach it).
__device__ __forceinline__ void cluster_sync() {
#ifdef QLM_BULK_SM90
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}
// bytes (a multiple of 16, 16-byte aligned ends) from global to shared memory, completing on bar.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#ifdef QLM_BULK_SM90
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_load_hint(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                               uint64_t policy) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
      "%4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
#endif
}
// A 2-D box of the tensor map at `map` (a __grid_constant__ kernel parameter) at coordinates (c0 inner,
// c1) to shared memory, completing on bar; out-of-bounds elements arrive as zeros and count as bytes.
__device__ __forceinline__ void tensor_load_2d(uint32_t dst, const void* map, int c0, int c1, uint32_t bar) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}
// The same box written to the same shared-memory offset in every block of the cluster named in `mask` (bit i:
// rank i), each completing its bytes on its own mbarrier at bar's offset.
__device__ __forceinline__ void tensor_load_2d_multicast(uint32_t dst, const void* map, int c0, int c1, uint32_t bar,
                                                         uint16_t mask) {
#ifdef QLM_BULK_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
#endif
}
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
#ifdef QLM_BULK_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#endif
}
// Named barrier 1 among the first kThreads threads of the block (the consumer warps).
template <int kThreads>
__device__ __forceinline__ void consumer_sync() {
#ifdef QLM_BULK_SM90
  asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
#endif
}

// A split tile's fix-up, CUTLASS's serial split-K way: the threads that stored the block's partial sums (weak,
// L2 stores) meet at a barrier, then this one thread adds 1 to the tile's counter and gets the count before; acq_rel
// at GPU scope, so the add releases the block's stores (ordered before it by the barrier: cumulativity) and acquires
// the stores of the segments counted before it, for the threads that read them (L2 loads, __ldcg) after the next
// barrier. The alternative, a __threadfence() in every thread before the barrier and again before the reads, costs
// each thread a wait for its own stores and an L1 invalidation (docs/w4a16-kernel-notes.md, v7l).
__device__ __forceinline__ unsigned arrive_tile_counter_acq_rel(unsigned* counter) {
  unsigned before = 0;
#ifdef QLM_BULK_SM90
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(before) : "l"(counter), "r"(1u) : "memory");
#endif
  return before;
}

// A block's segment of a split tile counted in (on counters[tile]), once its kThreads consumer threads have stored
// their partial sums (every one of them calls this): `last` (shared memory) becomes whether it is the tile's last of
// `segments`, the one that sums every segment's partials. acq_rel: the counter through arrive_tile_counter_acq_rel
// (QLM_W4FAST_FIXUP=2), else a __threadfence() in every thread first (and the caller's again, in the last segment,
// before its reads). Counters and tile apart, so that only the counting thread forms the address: so the stream and
// wgmma kernels compile to the same SASS as with the block written out in each (scripts/sass_diff.sh); with the
// address as the argument, ptxas changed the registers and spills of most of them.
template <int kThreads>
__device__ __forceinline__ void count_tile_segment(unsigned* counters, int64_t tile, int64_t segments, bool acq_rel,
                                                   bool& last, int tid) {
  if (!acq_rel) __threadfence();
  consumer_sync<kThreads>();
  if (tid == 0)
    last = (acq_rel ? arrive_tile_counter_acq_rel(counters + tile) : atomicAdd(counters + tile, 1u)) ==
           static_cast<unsigned>(segments - 1);
  consumer_sync<kThreads>();
}

// Stream-K: block b of G takes stages [b*T/G, (b+1)*T/G) of a sequence of T; the block that holds
// stage q is the largest b with floor(b * T / G) <= q.
__device__ __forceinline__ int64_t owner_of(int64_t q, int64_t T, int64_t G) { return ((q + 1) * G + T - 1) / T - 1; }

// A producer's place in its stream-K range, kept by counting (the one warp that issues every copy of an
// SM must not divide per stage): tile, stage j of that tile (stages of ks k-tiles), the group g_lo of
// the stage's first k-tile and that k-tile's row r_lo in its group (groups of tpg k-tiles).
struct StageCursor {
  int64_t tile, j, g_lo;
  int r_lo;
  __device__ __forceinline__ StageCursor(int64_t q, int64_t per_tile, int ks, int tpg)
      : tile(q / per_tile), j(q % per_tile), g_lo(j * ks / tpg), r_lo(static_cast<int>(j * ks % tpg)) {}
  // Scale / zero groups the stage's first nkt k-tiles touch.
  __device__ __forceinline__ int groups(int nkt, int tpg) const {
    int ng = 1;
    for (int r = r_lo + nkt - 1; r >= tpg; r -= tpg) ++ng;
    return ng;
  }
  __device__ __forceinline__ void next(int64_t per_tile, int ks, int tpg) {
    if (++j == per_tile) {
      j = 0, ++tile, g_lo = 0, r_lo = 0;
    } else {
      for (r_lo += ks; r_lo >= tpg; r_lo -= tpg) ++g_lo;
    }
  }
};

// The scales (and zeros) of the cuda_wna16_fast layout ([group][column block][8][8] 16-bit) a stage
// needs: lane i < ng copies group g_lo + i of column blocks nb0 .. nb0 + nvalid - 1 to dst + i * wn * 128
// (zeros par_bytes further), completing on bar.
template <bool ZP, int WN>
__device__ __forceinline__ void load_group_params(int lane, int ng, int64_t g_lo, int64_t n_blocks, int64_t nb0,
                                                  int nvalid, const void* scales, const void* zeros, uint32_t dst,
                                                  int par_bytes, uint32_t bar) {
  if (lane < ng) {
    const int64_t src = ((g_lo + lane) * n_blocks + nb0) * 8;
    const uint32_t at = dst + lane * (WN * 128);
    bulk_load(at, static_cast<const uint4*>(scales) + src, nvalid * 128, bar);
    if constexpr (ZP) bulk_load(at + par_bytes, static_cast<const uint4*>(zeros) + src, nvalid * 128, bar);
  }
}

// The producer warps' walk over their stages [q_begin, q_end) through a ring of `stages` slots (empty barriers at
// empty0 + 8 * slot): copy_stage(cursor, slot, weights, x) issues one stage's copies, the weights with the stage's
// expect_tx (which counts the activations' bytes too) and / or its activations. The first ring's weights go out
// before waiting for the previous kernel (programmatic dependent launch: a no-op without it), which may write the
// activations; their activations after. The stage at walk position i (q_begin + i in order) takes slot i % stages and
// phase (i / stages) & 1, as the consumers count. With `parts` producer warps, warp `part` issues the stages of the
// slots it owns (ring_slot_producer: slot % parts, at most one warp per slot, ring_producer_warps), each walking the
// cursor over all stages: one warp's issue latency per stage (the per-lane copies run one after another) no longer
// paces the ring, and every slot keeps one producer, which the parity waits need (ring_schedule.h).
// kClusterWait: the empty barriers also count arrivals from another block of the cluster (mbar_arrive_peer).
// kWalk: the stages in the order of stream_k_walk_first / _stage (stream_k_walk.h), from q_first to q_end, then from
// q_begin to q_first, as the consumers walk them; without it (q_first unused) in order.
template <bool kClusterWait = false, bool kWalk = false, typename CopyStage>
__device__ __forceinline__ void produce_stages(int64_t q_begin, int64_t q_end, int64_t per_tile, int ks, int tpg,
                                               int stages, uint32_t empty0, CopyStage&& copy_stage, int part = 0,
                                               int parts = 1, int64_t q_first = 0) {
  parts = ring_producer_warps(parts, stages);
  if (part >= parts) return;
  // Walk position i's cursor from position i - 1's: the next stage, or q_begin after q_end - 1 (kWalk). Without kWalk
  // the code is the in-order walk's as it was (the stream kernel's machine code unchanged).
  const int64_t start = kWalk ? q_first : q_begin, wrap = kWalk ? q_end - q_first : 0;
  const auto advance = [&](StageCursor& c, int64_t i) {
    if constexpr (kWalk) {
      if (i == wrap) {
        c = StageCursor(q_begin, per_tile, ks, tpg);
        return;
      }
    }
    c.next(per_tile, ks, tpg);
  };
  StageCursor at(start, per_tile, ks, tpg), first(start, per_tile, ks, tpg);
  const int64_t pre = q_end - q_begin < stages ? q_end - q_begin : stages;
  // The prologue's stage i is slot i: this warp's are part, part + parts, ...
  for (int i = 0; i < pre; ++i, advance(at, i))
    if (ring_slot_producer(i, parts) == part) copy_stage(at, i, true, false);
  wait_for_predecessor();
  for (int i = 0; i < pre; ++i, advance(first, i))
    if (ring_slot_producer(i, parts) == part) copy_stage(first, i, false, true);
  int slot = 0, owner = 0;  // owner == ring_slot_producer(slot, parts), counted
  uint32_t phase = 1;       // walk position pre reuses slot 0 (pre == stages when it exists)
  for (int64_t q = q_begin + pre; q < q_end; ++q) {  // q - q_begin: the walk position
    if (owner == part) {
      if constexpr (kClusterWait)
        mbar_wait_cluster(empty0 + 8 * slot, phase ^ 1u);
      else
        mbar_wait(empty0 + 8 * slot, phase ^ 1u);
      copy_stage(at, slot, true, true);
    }
    if (++slot == stages)
      slot = 0, owner = 0, phase ^= 1u;
    else if (++owner == parts)
      owner = 0;
    advance(at, q + 1 - q_begin);
  }
}

#undef QLM_BULK_SM90

}  // namespace qlm::cuda::bulk
