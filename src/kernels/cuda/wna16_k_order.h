// Where the wgmma kernel's consumers find the bytes that put a fast-layout code word into the MMA's k order
// (natural_k_word in sm90a/wna16_wgmma_kernel.cuh): host and device, so the CPU tests can check the exchange against
// the layout's own readers (tests/kernels/wna16_k_order_test.cc).
//
// A lane's word of a k-tile holds packed rows 4t..4t+3 (t = lane % 4) of its two fragment columns, a byte per row:
// bytes 0, 2, 1, 3 = rows 4t, 4t + 1, 4t + 2, 4t + 3. The MMA's A fragment wants rows 2t, 2t + 1 (half 0) and 2t + 8,
// 2t + 9 (half 1), which lanes t / 2 and 2 + t / 2 of the same quad hold in the same two bytes (0 and 2 for even t,
// 1 and 3 for odd t). The new word is byte_perm(word of the half-0 lane, word of the half-1 lane, selector): bytes
// 0 and 2 from the first (rows 2t, 2t + 1), 1 and 3 from the second (rows 2t + 8, 2t + 9).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QLM_K_ORDER_HOST_DEVICE __host__ __device__
#else
#define QLM_K_ORDER_HOST_DEVICE
#endif

namespace qlm::cuda {

// The lane (of the warp) whose word holds half `half` (0: rows 2t, 2t + 1; 1: rows 2t + 8, 2t + 9) of `lane`'s rows.
QLM_K_ORDER_HOST_DEVICE constexpr int natural_k_source_lane(int lane, int half) {
  return (lane & ~3) | (2 * half + ((lane & 3) >> 1));
}

// The __byte_perm selector that assembles `lane`'s word from the two source words (first: half 0, second: half 1).
QLM_K_ORDER_HOST_DEVICE constexpr uint32_t natural_k_byte_selector(int lane) { return (lane & 1) ? 0x7351u : 0x6240u; }

}  // namespace qlm::cuda

#undef QLM_K_ORDER_HOST_DEVICE
