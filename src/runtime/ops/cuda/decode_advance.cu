// The last node of a CUDA-graph decode step (launch_decode_advance): the greedy token chosen on the device and the
// next step's inputs written, so steps can follow each other without the host.
#include <cmath>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kAdvanceThreads = 1024;

// (value, index) of the larger logit: NaN never wins, ties go to the lower index (runtime::argmax's order).
struct Best {
  float value;
  int32_t index;  // -1: no candidate yet
};
__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

__global__ void __launch_bounds__(kAdvanceThreads)
    decode_advance_kernel(const float* __restrict__ logits, int64_t vocab, int32_t* __restrict__ step,
                          float* __restrict__ angles, const float* __restrict__ table, int64_t table_rows,
                          int64_t half) {
  pdl_enter();
  Best best{0.0f, -1};
  for (int64_t i = threadIdx.x; i < vocab; i += kAdvanceThreads) {
    const float v = logits[i];
    if (!isnan(v)) best = better(best, Best{v, static_cast<int32_t>(i)});
  }
  for (int off = 16; off > 0; off >>= 1) {
    const Best other{__shfl_down_sync(0xffffffffu, best.value, off), __shfl_down_sync(0xffffffffu, best.index, off)};
    best = better(best, other);
  }
  __shared__ Best warp_best[kAdvanceThreads / 32];
  __shared__ int32_t next_row;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    Best b = warp_best[0];
    for (int w = 1; w < kAdvanceThreads / 32; ++w) b = better(b, warp_best[w]);
    const int32_t row = step[1] + 1;
    step[0] = b.index < 0 ? 0 : b.index;  // every logit NaN: token 0, as runtime::argmax
    step[1] = row;
    next_row = row;
  }
  __syncthreads();
  const int64_t row = next_row;
  if (row >= table_rows) return;  // past the table: no step is enqueued there (the host's bound)
  for (int64_t i = threadIdx.x; i < 2 * half; i += kAdvanceThreads) angles[i] = table[row * 2 * half + i];
}

}  // namespace

cudaError_t launch_decode_advance(const float* logits, int64_t vocab, int32_t* step, float* angles, const float* table,
                                  int64_t table_rows, int64_t half, cudaStream_t stream) {
  if (vocab < 1 || vocab > INT32_MAX || table_rows < 0 || half < 0) return cudaErrorInvalidValue;
  return launch_pdl(decode_advance_kernel, dim3(1), kAdvanceThreads, 0, stream, logits, vocab, step, angles, table,
                    table_rows, half);
}

}  // namespace qlm::ops::cu
