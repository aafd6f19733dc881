// The residual add and RMSNorm of a decoder layer as device code shared by the standalone norm kernel
// (runtime/ops/cuda/rms_norm.cu) and the GEMMs that run it as their tail (kernels/linear_tail.h): the same
// operations in the same order, so a tail gives the standalone kernel's bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/wna16_fast_device.cuh"
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

// Counts the calling block in, by one thread after a barrier that follows every store of the block: whether it is
// the last of `blocks` to arrive. One acq_rel atomic at GPU scope: the block's stores (ordered before it by the
// barrier; the atomic's release is cumulative) are visible to the last block, whose threads see every block's after
// the next barrier. The last block leaves the counter zero for the next launch.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned blocks) {
  unsigned before = 0;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(before) : "l"(counter), "r"(1u) : "memory");
  const bool last = before == blocks - 1;
  if (last) *counter = 0u;
  return last;
}

// The tail for `rows` rows of the layer output y (BF16 or F16 bits, rows y_stride apart, written by other blocks of
// the grid before this one was the last to finish: read through L2), by threads 0 .. nthreads - 1 (a multiple of
// 32) of the calling block, which sync() brings together; partial: 32 doubles of shared memory. The standalone
// kernel's block has T = rms_norm_block_threads(dim, 4) threads; thread vt of it sums the float4s at 4·vt, 4·vt + 4·T,
// ... and the warps' sums are added in warp order. Here a warp takes the virtual warps vw = warp, warp + warps, ...
// lane for lane, so each virtual thread's sum and each warp's xor-shuffle tree are the same. Where a thread's share
// fits kMaxVw virtual warps of kMaxPer float4s, all of its loads are issued at once and the row stays in registers
// (one round trip to memory, not one per virtual warp and pass); else a loop over them.
template <bool BF16, typename Sync>
__device__ void block_add_rms_norm(const AddRmsNormTail& t, const uint16_t* y, int64_t y_stride, int rows, int64_t dim,
                                   int tid, int nthreads, double* partial, Sync&& sync) {
  constexpr int kMaxVw = 4, kMaxPer = 2;
  const int T = static_cast<int>(rms_norm_block_threads(dim, 4));
  const int lane = tid & 31, warp = tid >> 5, warps = nthreads >> 5, vwarps = T / 32;
  const int64_t per = (dim + 4 * T - 1) / (4 * T);  // float4s of virtual thread 0 (the most)
  const bool in_registers = (vwarps + warps - 1) / warps <= kMaxVw && per <= kMaxPer;
  for (int r = 0; r < rows; ++r) {
    float* xr = t.residual + r * t.residual_stride;
    const uint16_t* yr = y + r * y_stride;
    uint16_t* out = static_cast<uint16_t*>(t.out) + r * t.out_stride;
    if (in_registers) {
      // Slot (k, j) of this thread: float4 j of virtual warp warp + k·warps, at element slot(k, j) of the row, or
      // -1 where that holds nothing.
      const auto slot = [&](int k, int j) -> int64_t {
        const int vw = warp + k * warps;
        const int64_t i = 4 * (vw * 32 + lane) + int64_t{4} * T * j;
        return vw < vwarps && j < per && i < dim ? i : -1;
      };
      float4 v[kMaxVw][kMaxPer], w[kMaxVw][kMaxPer];
      uint2 a[kMaxVw][kMaxPer];
#pragma unroll
      for (int k = 0; k < kMaxVw; ++k)
#pragma unroll
        for (int j = 0; j < kMaxPer; ++j) {
          if (const int64_t i = slot(k, j); i >= 0) {
            v[k][j] = *reinterpret_cast<const float4*>(xr + i);
            a[k][j] = __ldcg(reinterpret_cast<const uint2*>(yr + i));
            w[k][j] = *reinterpret_cast<const float4*>(t.weight + i);
          }
        }
#pragma unroll
      for (int k = 0; k < kMaxVw; ++k) {
        const int vw = warp + k * warps;
        if (vw >= vwarps) break;  // warp-uniform
        double sum = 0;
#pragma unroll
        for (int j = 0; j < kMaxPer; ++j) {
          if (const int64_t i = slot(k, j); i >= 0) {
            float4& e = v[k][j];
            e.x += act_lo<BF16>(a[k][j].x);
            e.y += act_hi<BF16>(a[k][j].x);
            e.z += act_lo<BF16>(a[k][j].y);
            e.w += act_hi<BF16>(a[k][j].y);
            *reinterpret_cast<float4*>(xr + i) = e;
            sum += sum_sq4(e);
          }
        }
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        if (lane == 0) partial[vw] = sum;
      }
      sync();  // every partial written
      double total = 0;
      for (int k = 0; k < vwarps; ++k) total += partial[k];
      const float inv = inv_rms(total, dim, t.eps);
#pragma unroll
      for (int k = 0; k < kMaxVw; ++k)
#pragma unroll
        for (int j = 0; j < kMaxPer; ++j) {
          if (const int64_t i = slot(k, j); i >= 0) {
            const float4 e = v[k][j], g = w[k][j];
            const uint32_t lo =
                to_bits(g.x * (e.x * inv), BF16) | static_cast<uint32_t>(to_bits(g.y * (e.y * inv), BF16)) << 16;
            const uint32_t hi =
                to_bits(g.z * (e.z * inv), BF16) | static_cast<uint32_t>(to_bits(g.w * (e.w * inv), BF16)) << 16;
            *reinterpret_cast<uint2*>(out + i) = make_uint2(lo, hi);
          }
        }
      sync();  // partial is reused by the next row
      continue;
    }
    for (int vw = warp; vw < vwarps; vw += warps) {
      double sum = 0;
      for (int64_t i = 4 * (vw * 32 + lane); i < dim; i += 4 * T) {
        float4 e = *reinterpret_cast<const float4*>(xr + i);
        e.x += act_lo<BF16>(__ldcg(yr + i));
        e.y += act_lo<BF16>(__ldcg(yr + i + 1));
        e.z += act_lo<BF16>(__ldcg(yr + i + 2));
        e.w += act_lo<BF16>(__ldcg(yr + i + 3));
        *reinterpret_cast<float4*>(xr + i) = e;
        sum += sum_sq4(e);
      }
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == 0) partial[vw] = sum;
    }
    sync();  // every partial and every residual element of the row written
    double total = 0;
    for (int k = 0; k < vwarps; ++k) total += partial[k];
    const float inv = inv_rms(total, dim, t.eps);
    for (int vt = tid; vt < T; vt += nthreads)
      for (int64_t i = 4 * vt; i < dim; i += 4 * T) {
        const float4 e = *reinterpret_cast<const float4*>(xr + i);
        const float4 g = *reinterpret_cast<const float4*>(t.weight + i);
        out[i] = to_bits(g.x * (e.x * inv), BF16);
        out[i + 1] = to_bits(g.y * (e.y * inv), BF16);
        out[i + 2] = to_bits(g.z * (e.z * inv), BF16);
        out[i + 3] = to_bits(g.w * (e.w * inv), BF16);
      }
    sync();  // partial is reused by the next row
  }
}

// The tail by the grid's last block: every block calls it after its last store of y, with threads 0 .. nthreads - 1
// and sync() as for block_add_rms_norm; is_last: a shared-memory flag.
template <bool BF16, typename Sync>
__device__ __forceinline__ void last_block_add_rms_norm(const AddRmsNormTail& t, unsigned* done, const uint16_t* y,
                                                        int64_t N, int rows, int tid, int nthreads, double* partial,
                                                        bool& is_last, Sync&& sync) {
  sync();  // every store of the block before the count
  if (tid == 0) is_last = arrive_last(done, gridDim.x);
  sync();
  if (is_last) block_add_rms_norm<BF16>(t, y, N, rows, N, tid, nthreads, partial, sync);
}

}  // namespace qlm::cuda
