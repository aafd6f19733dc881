// Device helpers of the producer/consumer pipelines in shared memory (sm_90: mbarriers with
// transaction counts, `cp.async.bulk` global -> shared copies) and of the stream-K work split, shared
// by the stream (wna16_stream_kernels.cu) and wgmma (sm90a/wna16_wgmma.cu) kernels of cuda_wna16_fast.
// The mbarrier and bulk-copy instructions need sm_90: compiled for an older device (or in the host
// pass) those helpers are empty, so callers must run them on sm_90 only.
#pragma once

#include <cstdint>

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

// Stream-K: block b of G takes stages [b*T/G, (b+1)*T/G) of a sequence of T; the block that holds
// stage q is the largest b with floor(b * T / G) <= q.
__device__ __forceinline__ int64_t owner_of(int64_t q, int64_t T, int64_t G) { return ((q + 1) * G + T - 1) / T - 1; }

#undef QLM_BULK_SM90

}  // namespace qlm::cuda::bulk
