// Kernels of `cuda_wna16`: activation gather, dequantizing GEMV (small M), weight dequantization
// for cuBLAS (large M), split-K reduction and bias rows. Layout: kernels/cuda/wna16_layout.h.
//
// Dequantization is exact up to one rounding: for a code c and zero z, as_float(0x4B000000 | c)
// is 2^23 + c exactly, and subtracting the f32 2^23 + z (exact, as c, z < 256) gives c - z exactly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/wna16_dequant.cuh"
#include "kernels/cuda/wna16_kernels.h"

namespace qlm::cuda {
namespace {

using namespace wna16;

template <typename T>
__global__ void gather_x_kernel(const T* __restrict__ x, int64_t M, int64_t K, int64_t rows,
                                const int32_t* __restrict__ row_source, float* __restrict__ xf) {
  const int64_t total = M * rows;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / rows;
    const int32_t r = row_source[i - m * rows];
    xf[i] = r >= 0 ? to_f32(x[m * K + r]) : 0.0f;
  }
}

// One lane owns 4 adjacent columns (one 16-byte vector of every code row); the block's warps take
// consecutive chunk ranges of the same 128 columns and are summed through shared memory
// (accumulate_chunks and sum_warps, wna16_dequant.cuh).
template <int BITS, int M>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(Wna16DeviceWeights w, const float* __restrict__ xf,
                                                               int64_t chunks_per_warp, float* __restrict__ partial) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t quads = w.N_pad / 4;
  const int64_t quad = blockIdx.x * int64_t{32} + lane;
  const int64_t c_begin = (blockIdx.y * int64_t{kGemvWarps} + warp) * chunks_per_warp;
  const int64_t c_end = min(c_begin + chunks_per_warp, w.chunks);

  float acc[M][4];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
  if (quad < quads) accumulate_chunks<BITS, M>(w, quad, quads, c_begin, c_end, xf, w.rows, M, acc);

  sum_warps<M>(acc, [&](int m, int col, float sum) {
    const int64_t n = blockIdx.x * int64_t{kGemvColumns} + col;
    if (n < w.N) partial[(blockIdx.y * int64_t{M} + m) * w.N + n] = sum;
  });
}

template <typename T>
__global__ void reduce_kernel(const float* __restrict__ partial, int splits, int64_t M, int64_t N,
                              const float* __restrict__ bias, T* __restrict__ y) {
  const int64_t total = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * total + i];
    if (bias) sum += bias[i % N];
    y[i] = from_f32<T>(sum);
  }
}

// Thread (x, y) of a block: column quad blockIdx.x*32 + x, chunks blockIdx.y*8 + y + k*gridDim.y*8.
template <int BITS, typename T>
__global__ void dequant_kernel(Wna16DeviceWeights w, T* __restrict__ out) {
  constexpr int W = Chunk<BITS>::kWords;
  constexpr int R = Chunk<BITS>::kRows;
  const int64_t quads = w.N_pad / 4;
  const int64_t quad = blockIdx.x * int64_t{32} + threadIdx.x;
  if (quad >= quads) return;
  const uint4* codes = reinterpret_cast<const uint4*>(w.codes);
  for (int64_t c = blockIdx.y * int64_t{8} + threadIdx.y; c < w.chunks; c += int64_t{gridDim.y} * 8) {
    uint32_t q[4][W];
#pragma unroll
    for (int v = 0; v < W; ++v) {
      const uint4 qv = __ldg(codes + (c * W + v) * quads + quad);
      q[0][v] = qv.x, q[1][v] = qv.y, q[2][v] = qv.z, q[3][v] = qv.w;
    }
    float s[4], zf[4];
    load_group(w, __ldg(w.chunk_group + c), quad * 4, s, zf);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int32_t r = __ldg(w.row_source + c * R + i);
      if (r < 0) continue;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = (__uint_as_float(kMagicBits | field<BITS, W>(q[j], i)) - zf[j]) * s[j];
      store4(out + r * w.N_pad + quad * 4, v);
    }
  }
}

template <typename T>
__global__ void bias_rows_kernel(const float* __restrict__ bias, int64_t M, int64_t N, T* __restrict__ y) {
  const int64_t total = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_f32<T>(bias[i % N]);
}

unsigned grid_for(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (int64_t{1} << 20) ? (int64_t{1} << 20) : blocks));
}

template <int BITS, int M>
void gemv(const Wna16DeviceWeights& w, const float* xf, int splits, int64_t cpw, float* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.N_pad + kGemvColumns - 1) / kGemvColumns), static_cast<unsigned>(splits));
  gemv_kernel<BITS, M><<<grid, kGemvWarps * 32, 0, stream>>>(w, xf, cpw, partial);
}

template <int BITS>
cudaError_t gemv_bits(const Wna16DeviceWeights& w, const float* xf, int M, int splits, int64_t cpw, float* partial,
                      cudaStream_t stream) {
  switch (M) {
    case 1: gemv<BITS, 1>(w, xf, splits, cpw, partial, stream); break;
    case 2: gemv<BITS, 2>(w, xf, splits, cpw, partial, stream); break;
    case 3: gemv<BITS, 3>(w, xf, splits, cpw, partial, stream); break;
    case 4: gemv<BITS, 4>(w, xf, splits, cpw, partial, stream); break;
    case 5: gemv<BITS, 5>(w, xf, splits, cpw, partial, stream); break;
    case 6: gemv<BITS, 6>(w, xf, splits, cpw, partial, stream); break;
    case 7: gemv<BITS, 7>(w, xf, splits, cpw, partial, stream); break;
    case 8: gemv<BITS, 8>(w, xf, splits, cpw, partial, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int BITS, typename T>
cudaError_t dequant(const Wna16DeviceWeights& w, void* out, cudaStream_t stream) {
  const int64_t quads = w.N_pad / 4;
  const int64_t chunk_blocks = (w.chunks + 7) / 8;
  const dim3 grid(static_cast<unsigned>((quads + 31) / 32),
                  static_cast<unsigned>(chunk_blocks < 65535 ? chunk_blocks : 65535));
  dequant_kernel<BITS, T><<<grid, dim3(32, 8), 0, stream>>>(w, static_cast<T*>(out));
  return cudaGetLastError();
}

template <typename T>
cudaError_t dequant_act(const Wna16DeviceWeights& w, void* out, cudaStream_t stream) {
  switch (w.bits) {
    case 2: return dequant<2, T>(w, out, stream);
    case 3: return dequant<3, T>(w, out, stream);
    case 4: return dequant<4, T>(w, out, stream);
    case 8: return dequant<8, T>(w, out, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_wna16_gather_x(const void* x, Wna16Act act, int64_t M, const Wna16DeviceWeights& w, float* xf,
                                  cudaStream_t stream) {
  const unsigned grid = grid_for(M * w.rows, 256);
  switch (act) {
    case Wna16Act::F32:
      gather_x_kernel<<<grid, 256, 0, stream>>>(static_cast<const float*>(x), M, w.K, w.rows, w.row_source, xf);
      break;
    case Wna16Act::F16:
      gather_x_kernel<<<grid, 256, 0, stream>>>(static_cast<const __half*>(x), M, w.K, w.rows, w.row_source, xf);
      break;
    case Wna16Act::BF16:
      gather_x_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), M, w.K, w.rows, w.row_source, xf);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_wna16_gemv(const Wna16DeviceWeights& w, const float* xf, int M, int splits, int64_t chunks_per_warp,
                              float* partial, cudaStream_t stream) {
  if (splits < 1 || splits > 65535 || chunks_per_warp < 1) return cudaErrorInvalidValue;
  switch (w.bits) {
    case 2: return gemv_bits<2>(w, xf, M, splits, chunks_per_warp, partial, stream);
    case 3: return gemv_bits<3>(w, xf, M, splits, chunks_per_warp, partial, stream);
    case 4: return gemv_bits<4>(w, xf, M, splits, chunks_per_warp, partial, stream);
    case 8: return gemv_bits<8>(w, xf, M, splits, chunks_per_warp, partial, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_wna16_reduce(const float* partial, int splits, int64_t M, int64_t N, const float* bias, void* y,
                                Wna16Act act, cudaStream_t stream) {
  const unsigned grid = grid_for(M * N, 256);
  switch (act) {
    case Wna16Act::F32:
      reduce_kernel<<<grid, 256, 0, stream>>>(partial, splits, M, N, bias, static_cast<float*>(y));
      break;
    case Wna16Act::F16:
      reduce_kernel<<<grid, 256, 0, stream>>>(partial, splits, M, N, bias, static_cast<__half*>(y));
      break;
    case Wna16Act::BF16:
      reduce_kernel<<<grid, 256, 0, stream>>>(partial, splits, M, N, bias, static_cast<__nv_bfloat16*>(y));
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_wna16_dequant(const Wna16DeviceWeights& w, void* out, Wna16Act act, cudaStream_t stream) {
  switch (act) {
    case Wna16Act::F32: return dequant_act<float>(w, out, stream);
    case Wna16Act::F16: return dequant_act<__half>(w, out, stream);
    case Wna16Act::BF16: return dequant_act<__nv_bfloat16>(w, out, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_wna16_bias_rows(const float* bias, int64_t M, int64_t N, void* y, Wna16Act act,
                                   cudaStream_t stream) {
  const unsigned grid = grid_for(M * N, 256);
  switch (act) {
    case Wna16Act::F32: bias_rows_kernel<<<grid, 256, 0, stream>>>(bias, M, N, static_cast<float*>(y)); break;
    case Wna16Act::F16: bias_rows_kernel<<<grid, 256, 0, stream>>>(bias, M, N, static_cast<__half*>(y)); break;
    case Wna16Act::BF16: bias_rows_kernel<<<grid, 256, 0, stream>>>(bias, M, N, static_cast<__nv_bfloat16*>(y)); break;
  }
  return cudaGetLastError();
}

}  // namespace qlm::cuda
