// The residual add and RMSNorm of a decoder layer as device code shared by the standalone norm kernel
// (runtime/ops/cuda/rms_norm.cu) and the GEMMs that run it as their tail (kernels/linear_tail.h): the same
// operations in the same order, so a tail gives the standalone kernel's bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/linear_tail.h"

namespace qlm::cuda {

// Threads of the standalone norm kernel's block for rows of `dim` elements at `per_thread` elements a thread (4 with
// 16-byte loads): one thread per load, 32 to 1024. Its sums of squares are grouped by this count.
__host__ __device__ constexpr int64_t rms_norm_block_threads(int64_t dim, int64_t per_thread) {
  const int64_t t = (dim / per_thread + 31) / 32 * 32;
  return t < 32 ? 32 : t > 1024 ? 1024 : t;
}

__device__ __forceinline__ double sum_sq4(float4 v) {
  return static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
         static_cast<double>(v.w) * v.w;
}

__device__ __forceinline__ float inv_rms(double total, int64_t dim, float eps) {
  return static_cast<float>(1.0 / sqrt(total / static_cast<double>(dim) + eps));
}

__device__ __forceinline__ float half_bits_to_float(uint16_t bits, bool bf16) {
  return bf16 ? __uint_as_float(static_cast<uint32_t>(bits) << 16) : __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ uint16_t float_to_half_bits(float v, bool bf16) {
  return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

// The tail for `rows` rows of the layer output y (BF16 or F16 bits, rows y_stride apart, written by other blocks of
// the grid before this one was the last to finish: read through L2), by threads 0 .. nthreads - 1 (a multiple of
// 32) of the calling block, which sync() brings together; partial: 32 doubles of shared memory. The standalone
// kernel's block has T = rms_norm_block_threads(dim, 4) threads; thread vt of it sums the float4s at 4·vt, 4·vt + 4·T,
// ... and the warps' sums are added in warp order. Here a warp takes the virtual warps vw = warp, warp + warps, ...
// lane for lane, so each virtual thread's sum and each warp's xor-shuffle tree are the same.
template <bool BF16, typename Sync>
__device__ void block_add_rms_norm(const AddRmsNormTail& t, const uint16_t* y, int64_t y_stride, int rows, int64_t dim,
                                   int tid, int nthreads, double* partial, Sync&& sync) {
  const int T = static_cast<int>(rms_norm_block_threads(dim, 4));
  const int lane = tid & 31, warp = tid >> 5, warps = nthreads >> 5;
  for (int r = 0; r < rows; ++r) {
    float* xr = t.residual + r * t.residual_stride;
    const uint16_t* yr = y + r * y_stride;
    for (int vw = warp; vw < T / 32; vw += warps) {
      double sum = 0;
      for (int64_t i = 4 * (vw * 32 + lane); i < dim; i += 4 * T) {
        float4 v = *reinterpret_cast<const float4*>(xr + i);
        v.x += half_bits_to_float(__ldcg(yr + i), BF16);
        v.y += half_bits_to_float(__ldcg(yr + i + 1), BF16);
        v.z += half_bits_to_float(__ldcg(yr + i + 2), BF16);
        v.w += half_bits_to_float(__ldcg(yr + i + 3), BF16);
        *reinterpret_cast<float4*>(xr + i) = v;
        sum += sum_sq4(v);
      }
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == 0) partial[vw] = sum;
    }
    sync();  // every partial and every residual element of the row written
    double total = 0;
    for (int w = 0; w < T / 32; ++w) total += partial[w];
    const float inv = inv_rms(total, dim, t.eps);
    uint16_t* out = static_cast<uint16_t*>(t.out) + r * t.out_stride;
    for (int vt = tid; vt < T; vt += nthreads)
      for (int64_t i = 4 * vt; i < dim; i += 4 * T) {
        const float4 v = *reinterpret_cast<const float4*>(xr + i);
        const float4 w = *reinterpret_cast<const float4*>(t.weight + i);
        out[i] = float_to_half_bits(w.x * (v.x * inv), BF16);
        out[i + 1] = float_to_half_bits(w.y * (v.y * inv), BF16);
        out[i + 2] = float_to_half_bits(w.z * (v.z * inv), BF16);
        out[i + 3] = float_to_half_bits(w.w * (v.w * inv), BF16);
      }
    sync();  // partial is reused by the next row
  }
}

}  // namespace qlm::cuda
