// The last node of a CUDA-graph decode step (launch_decode_advance): the greedy token chosen on the device and the
// next step's inputs written, so steps can follow each other without the host.
//
// kDecodeAdvanceBlocks blocks each take a strided share of the logits to one (value, index); the last block to
// finish (counted on scratch[0], acq_rel) reduces the blocks' results, one per thread, writes the step and sets
// the count back to 0 for the next replay. Latency is the cost here: one block scanning Llama-3's 128256 logits
// took ~35 µs (H200), and 64 blocks whose last one read the 64 results in a loop of dependent loads ~28 µs (H100;
// decode steps traced by scripts/probe_decode_trace.sh), so every thread keeps kAdvanceLoads loads in flight.
#include <cmath>

#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kAdvanceThreads = 256;

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

// The block's best; valid in thread 0.
__device__ __forceinline__ Best block_best(Best best) {
  for (int off = 16; off > 0; off >>= 1) {
    const Best other{__shfl_down_sync(0xffffffffu, best.value, off), __shfl_down_sync(0xffffffffu, best.index, off)};
    best = better(best, other);
  }
  __shared__ Best warp_best[kAdvanceThreads / 32];
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kAdvanceThreads / 32; ++w) best = better(best, warp_best[w]);
  return best;
}

__device__ __forceinline__ unsigned count_in_acq_rel(unsigned* counter) {
  unsigned before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(before) : "l"(counter) : "memory");
  return before;
}

// Loads in flight per thread in the scan.
constexpr int kAdvanceLoads = 4;
static_assert(kDecodeAdvanceBlocks <= kAdvanceThreads, "the last block takes one block's result per thread");

__global__ void __launch_bounds__(kAdvanceThreads)
    decode_advance_kernel(const float* __restrict__ logits, int64_t vocab, int32_t* __restrict__ step,
                          float* __restrict__ angles, const float* __restrict__ table, int64_t table_rows, int64_t half,
                          int32_t* __restrict__ scratch) {
  pdl_enter();
  Best best{0.0f, -1};
  const int64_t stride = int64_t{gridDim.x} * kAdvanceThreads * kAdvanceLoads;
  for (int64_t base = blockIdx.x * int64_t{kAdvanceThreads} * kAdvanceLoads + threadIdx.x; base < vocab;
       base += stride) {
    float v[kAdvanceLoads];
#pragma unroll
    for (int u = 0; u < kAdvanceLoads; ++u) {
      const int64_t i = base + u * kAdvanceThreads;
      v[u] = i < vocab ? __ldcg(logits + i) : NAN;
    }
#pragma unroll
    for (int u = 0; u < kAdvanceLoads; ++u)
      if (!isnan(v[u])) best = better(best, Best{v[u], static_cast<int32_t>(base + u * kAdvanceThreads)});
  }
  best = block_best(best);
  __shared__ bool last;
  __shared__ int32_t next_row;
  Best* partial = reinterpret_cast<Best*>(scratch + 2);
  unsigned* count = reinterpret_cast<unsigned*>(scratch);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = best;
    // Releases this block's result; the last block's count acquires every other block's.
    last = count_in_acq_rel(count) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // The last block: one block's result per thread, reduced like a block's own (the order of `better` is total).
  Best p{0.0f, -1};
  if (threadIdx.x < gridDim.x) p = Best{__ldcg(&partial[threadIdx.x].value), __ldcg(&partial[threadIdx.x].index)};
  p = block_best(p);
  if (threadIdx.x == 0) {
    *count = 0u;  // for the next replay (kernels of one stream never overlap this one's last block)
    const int32_t row = step[1] + 1;
    step[0] = p.index < 0 ? 0 : p.index;  // every logit NaN: token 0, as runtime::argmax
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
                                  int64_t table_rows, int64_t half, int32_t* scratch, cudaStream_t stream) {
  if (vocab < 1 || vocab > INT32_MAX || table_rows < 0 || half < 0 || scratch == nullptr) return cudaErrorInvalidValue;
  return launch_pdl(decode_advance_kernel, dim3(kDecodeAdvanceBlocks), kAdvanceThreads, 0, stream, logits, vocab, step,
                    angles, table, table_rows, half, scratch);
}

}  // namespace qlm::ops::cu
