// The dense GEMV of dense_gemv.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/act_quant_device.cuh"
#include "kernels/cuda/dense_gemv.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/vec_dot.cuh"

namespace qlm::cuda {
namespace {

constexpr int kGemvWarps = 8;  // output columns per block
// 16-byte vectors a lane has in flight at once: a whole BF16 row of K = 4096 (16 vectors a lane).
constexpr int kGemvBatch = 16;

template <typename T>
struct GemvVec {
  static constexpr int E = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector
};

// Warp w of block b computes column n = b · kGemvWarps + w for every row. `vectors`: rows are whole 16-byte vectors
// at 16-byte aligned addresses (checked on the host), else the lanes take single elements.
template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32)
    dense_gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const float* __restrict__ bias, T* y, int M,
                      int64_t K, int64_t N, bool vectors) {
  pdl_enter();
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * int64_t{kGemvWarps} + threadIdx.x / 32;
  if (n >= N) return;
  float acc[kDenseGemvMaxRows] = {};
  const T* wrow = w + n * K;
  if (vectors) {
    constexpr int E = GemvVec<T>::E;
    const int64_t KV = K / E;  // vectors per row
    const uint4* wv = reinterpret_cast<const uint4*>(wrow);
    for (int64_t v0 = 0; v0 < KV; v0 += 32 * kGemvBatch) {
      uint4 wb[kGemvBatch];
#pragma unroll
      for (int u = 0; u < kGemvBatch; ++u) {
        const int64_t v = v0 + u * 32 + lane;
        if (v < KV) wb[u] = __ldg(wv + v);  // cached: a thin layer (a router) may still be in L2 at the next step
      }
#pragma unroll
      for (int u = 0; u < kGemvBatch; ++u) {
        const int64_t v = v0 + u * 32 + lane;
        if (v >= KV) break;
#pragma unroll
        for (int m = 0; m < kDenseGemvMaxRows; ++m)
          if (m < M) acc[m] = vec_dot_add<T>(wb[u], reinterpret_cast<const uint4*>(x + m * K)[v], acc[m]);
      }
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) {
      const float wk = load_float(wrow, k);
#pragma unroll
      for (int m = 0; m < kDenseGemvMaxRows; ++m)
        if (m < M) acc[m] = fmaf(load_float(x, m * K + k), wk, acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < kDenseGemvMaxRows; ++m)
    for (int offset = 16; offset > 0; offset /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], offset);
  if (lane < M) {
    float out = 0.0f;
#pragma unroll
    for (int m = 0; m < kDenseGemvMaxRows; ++m)
      if (m == lane) out = acc[m];
    if (bias) out += bias[n];
    store_float(y, lane * N + n, out);
  }
}

template <typename T>
cudaError_t launch_typed(const DenseGemvArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vectors = a.K % GemvVec<T>::E == 0 && aligned(x) && aligned(w);
  const unsigned grid = static_cast<unsigned>((a.N + kGemvWarps - 1) / kGemvWarps);
  return launch_pdl(dense_gemv_kernel<T>, grid, kGemvWarps * 32, 0, stream, x, w, a.bias, static_cast<T*>(a.y),
                    static_cast<int>(a.M), a.K, a.N, vectors);
}

}  // namespace

cudaError_t launch_dense_gemv(const DenseGemvArgs& a, cudaStream_t stream) {
  if (a.M < 1 || a.M > kDenseGemvMaxRows || a.K < 1 || a.N < 1 || a.N > (int64_t{1} << 31) * kGemvWarps)
    return cudaErrorInvalidValue;
  switch (a.type) {
    case kF32: return launch_typed<float>(a, stream);
    case kF16: return launch_typed<__half>(a, stream);
    case kBF16: return launch_typed<__nv_bfloat16>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace qlm::cuda
