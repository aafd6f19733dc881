// GPU activation quantizers (see act_quant.h). One block per row: the row's reduction (absmax, or
// min/max for asymmetric INT8) then its codes; the second read of the row hits the cache. Per-token
// groups: one warp per group. Per-tensor dynamic scales: a grid-wide absmax first. Every loop over
// elements loads kBatch of a thread's elements before using any (for_each_batched): rolled, each
// iteration waited for its own load, ~0.5 µs a round trip, 56 rounds a pass on a 14336-wide row.
// The fast W8A8 kernels' per-token symmetric scales take the vectorised quantizer instead
// (launch_w8a8_quant_token).
#include "kernels/cuda/act_quant.h"
#include "kernels/cuda/act_quant_device.cuh"

namespace qlm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kE4M3Max = 448.0f;
constexpr int kBatch = 8;

// f(k, x[k]) for k = first, first + step, ... below end, in batches of kBatch loads issued together (elements past
// the end load nothing and are not passed to f). The order of the calls is the rolled loop's.
template <typename T, typename F>
__device__ __forceinline__ void for_each_batched(const T* x, int64_t first, int64_t end, int64_t step, F f) {
  for (int64_t k = first; k < end; k += kBatch * step) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = k + j * step < end ? load_float(x, k + j * step) : 0.0f;
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (k + j * step < end) f(k + j * step, v[j]);
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide max / min (every thread gets the result). `sh` holds 32 floats.
__device__ float block_max(float v, float* sh) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : -INFINITY;
  r = warp_max(r);
  if (threadIdx.x == 0) sh[0] = r;
  __syncthreads();
  r = sh[0];
  __syncthreads();
  return r;
}
__device__ float block_min(float v, float* sh) { return -block_max(-v, sh); }

__device__ __forceinline__ float inverse(float s) { return s > 0 ? __fdiv_rn(1.0f, s) : 0.0f; }

__device__ __forceinline__ uint8_t fp8_code(float v, float inv) {
  return f32_to_e4m3(clamp_like_std(__fmul_rn(v, inv), -kE4M3Max, kE4M3Max));
}

template <typename T>
__device__ void write_codes(const ActQuantArgs& a, const T* xr, int64_t r, int64_t k0, int64_t k1, int64_t step,
                            int64_t first, float inv, int32_t zp) {
  if (a.fp8) {
    uint8_t* q = static_cast<uint8_t*>(a.codes) + r * a.K;
    for_each_batched(xr, k0 + first, k1, step, [&](int64_t k, float v) { q[k] = fp8_code(v, inv); });
  } else {
    int8_t* q = static_cast<int8_t*>(a.codes) + r * a.K;
    for_each_batched(xr, k0 + first, k1, step, [&](int64_t k, float v) { q[k] = int8_code(v, inv, zp); });
  }
}

template <typename T>
__global__ void tensor_absmax_kernel(const T* x, int64_t n, float* out) {
  __shared__ float sh[32];
  float m = 0;
  for_each_batched(x, blockIdx.x * int64_t{blockDim.x} + threadIdx.x, n, int64_t{gridDim.x} * blockDim.x,
                   [&](int64_t, float v) { m = fmaxf(m, fabsf(v)); });
  m = block_max(m, sh);
  // Non-negative floats order like their bit patterns.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned int*>(out), __float_as_uint(m));
}

// Rows of every scheme but per-token groups.
template <typename T>
__global__ void quant_rows_kernel(ActQuantArgs a) {
  __shared__ float sh[32];
  const int64_t r = blockIdx.x;
  const T* xr = static_cast<const T*>(a.x) + r * a.K;
  float scale = 0, inv = 0;
  int32_t zp = 0;
  if (a.mode == kStaticTensor) {
    scale = a.static_scale;
    inv = inverse(scale);
    zp = a.fp8 || a.symmetric ? 0 : a.static_zero;
  } else if (a.mode == kDynamicTensor) {
    const float am = *a.scratch;
    if (a.fp8) {
      scale = __fdiv_rn(am, kE4M3Max);
      inv = inverse(scale);
    } else {
      scale = int8_symmetric_scale(am, inv);
    }
  } else if (a.fp8 || a.symmetric) {  // dynamic per token, absmax
    float m = 0;
    for_each_batched(xr, threadIdx.x, a.K, blockDim.x, [&](int64_t, float v) { m = fmaxf(m, fabsf(v)); });
    const float am = block_max(m, sh);
    if (a.fp8) {
      scale = fmaxf(__fdiv_rn(am, kE4M3Max), __fdiv_rn(1.0f, kE4M3Max * 512.0f));
      inv = inverse(scale);
    } else {
      scale = int8_symmetric_scale(am, inv);
    }
  } else {  // dynamic per token, asymmetric INT8: the range always holds 0
    float lo = 0, hi = 0;
    for_each_batched(xr, threadIdx.x, a.K, blockDim.x, [&](int64_t, float v) {
      lo = fminf(lo, v);
      hi = fmaxf(hi, v);
    });
    lo = block_min(lo, sh);
    hi = block_max(hi, sh);
    scale = __fdiv_rn(__fsub_rn(hi, lo), 255.0f);
    inv = inverse(scale);
    zp = scale > 0 ? static_cast<int32_t>(rintf(__fsub_rn(-128.0f, __fdiv_rn(lo, scale)))) : 0;
  }
  write_codes(a, xr, r, 0, a.K, blockDim.x, threadIdx.x, inv, zp);
  if (threadIdx.x == 0) {
    a.scales[r] = scale;
    if (a.zeros) a.zeros[r] = zp;
  }
}

// Per-token groups (FP8): one warp per group of one row.
template <typename T>
__global__ void quant_groups_kernel(ActQuantArgs a) {
  const int64_t r = blockIdx.x;
  const T* xr = static_cast<const T*>(a.x) + r * a.K;
  const int lane = threadIdx.x & 31;
  for (int64_t g = threadIdx.x >> 5; g < a.groups; g += blockDim.x >> 5) {
    const int64_t k0 = g * a.group - a.phase < 0 ? 0 : g * a.group - a.phase;
    const int64_t k1 = (g + 1) * a.group - a.phase < a.K ? (g + 1) * a.group - a.phase : a.K;
    float m = 0;
    for_each_batched(xr, k0 + lane, k1, 32, [&](int64_t, float v) { m = fmaxf(m, fabsf(v)); });
    m = warp_max(m);
    const float scale = __fdiv_rn(fmaxf(m, 1e-10f), kE4M3Max);
    write_codes(a, xr, r, k0, k1, 32, lane, inverse(scale), 0);
    if (lane == 0) a.scales[r * a.groups + g] = scale;
  }
  if (threadIdx.x == 0 && a.zeros) a.zeros[r] = 0;
}

template <typename T>
cudaError_t launch_typed(const ActQuantArgs& a, cudaStream_t stream) {
  if (a.mode == kDynamicTensor) {
    cudaError_t e = cudaMemsetAsync(a.scratch, 0, sizeof(float), stream);
    if (e != cudaSuccess) return e;
    const int64_t n = a.M * a.K;
    const int64_t want = (n + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(want < 1024 ? (want < 1 ? 1 : want) : 1024);
    tensor_absmax_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.x), n, a.scratch);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  const unsigned rows = static_cast<unsigned>(a.M);
  if (a.mode == kDynamicTokenGroup) quant_groups_kernel<T><<<rows, kThreads, 0, stream>>>(a);
  else quant_rows_kernel<T><<<rows, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_act_quant(const ActQuantArgs& a, cudaStream_t stream) {
  if (a.M <= 0) return cudaSuccess;
  if (a.M > 0x7fffffff) return cudaErrorInvalidValue;
  switch (a.x_type) {
    case kF32: return launch_typed<float>(a, stream);
    case kF16: return launch_typed<__half>(a, stream);
    case kBF16: return launch_typed<__nv_bfloat16>(a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace qlm::cuda
