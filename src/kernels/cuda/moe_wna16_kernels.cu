// Grouped WNA16 MoE kernels: one launch per step for all experts (moe_wna16_kernels.h). The GEMM is
// the `cuda_wna16` split-K GEMV (wna16_kernels.cu) with the expert and its row tile looked up per
// block, and the same dequantization (wna16_dequant.cuh).
#include <type_traits>

#include "kernels/cuda/moe_wna16_kernels.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/silu_mul.cuh"
#include "kernels/cuda/wna16_dequant.cuh"

namespace qlm::cuda {
namespace {

using namespace wna16;

// The gather kernels' grid: x = expert rows (up to 2^31 - 1), y = chunks of kGatherColumns columns of the row, one
// column per thread. (One block per row looped over the row: at one token that was 2 blocks on the whole GPU, and
// silu_gather took 85 µs of Mixtral's 230 µs per layer on the H100, session 40.)
constexpr int kGatherColumns = 256;

// False where the grid cannot be launched: more than INT32_MAX rows, an empty row, more than 65535 column chunks.
bool gather_grid(int64_t rows_total, int64_t stride, dim3* grid) {
  const int64_t chunks = (stride + kGatherColumns - 1) / kGatherColumns;
  if (rows_total > INT32_MAX || stride < 1 || chunks > 65535) return false;
  *grid = dim3(static_cast<unsigned>(rows_total), static_cast<unsigned>(chunks));
  return true;
}

// Output element j of a row: packed row j (F32 output, the GEMV's order) or, for the tensor-core GEMM's 16-bit
// output, packed row 8c + (0, 4, 1, 5, 2, 6, 3, 7)[i] at j = 8c + i (moe_wna16_kernels.h).
template <typename O>
__device__ __forceinline__ int64_t packed_row_of(int64_t j) {
  if constexpr (std::is_same_v<O, float>) return j;
  return (j & ~int64_t{7}) | ((j >> 1) & 3) | ((j & 1) << 2);
}

template <typename O>
__device__ __forceinline__ O from_f32(float v) {
  if constexpr (std::is_same_v<O, float>)
    return v;
  else if constexpr (std::is_same_v<O, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

template <typename T, typename O>
__global__ void __launch_bounds__(kGatherColumns)
    gather_kernel(const T* __restrict__ x, int64_t K, const int32_t* __restrict__ row_token, MoeWna16Experts ex,
                  int64_t stride, O* __restrict__ xf) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t j = blockIdx.y * int64_t{kGatherColumns} + threadIdx.x;
  if (j >= stride) return;
  const int e = __ldg(ex.row_expert + r);
  const int64_t row = packed_row_of<O>(j);
  const int32_t src = row < ex.table[e].rows ? __ldg(ex.table[e].row_source + row) : -1;
  xf[r * stride + j] = from_f32<O>(src >= 0 ? to_f32(x[int64_t{row_token[r]} * K + src]) : 0.0f);
}

// One block: 128 columns of one tile of up to MT rows of one expert, one K split. Lanes own 4
// adjacent columns; the warps take consecutive chunk ranges (several chunks' loads in flight per
// lane, as the linear GEMV: accumulate_chunks) and are summed in shared memory.
template <int BITS, int MT>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemm_kernel(MoeWna16Experts ex, const float* __restrict__ xf, int64_t stride, int64_t N, int64_t chunks_per_warp,
                float* __restrict__ partial) {
  pdl_enter();
  const int64_t tile = blockIdx.y;
  const int e = __ldg(ex.tile_expert + tile);  // (in the array: the grid's tiles; valid below the count)
  if (tile >= __ldg(ex.tile_offsets + ex.num_experts)) return;  // uniform: the whole block leaves
  const int64_t r0 = __ldg(ex.offsets + e) + (tile - __ldg(ex.tile_offsets + e)) * MT;
  const int nrows = static_cast<int>(min(int64_t{MT}, __ldg(ex.offsets + e + 1) - r0));
  const Wna16DeviceWeights w = ex.table[e];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t quads = w.N_pad / 4;
  const int64_t quad = blockIdx.x * int64_t{32} + lane;
  const int64_t c_begin = (blockIdx.z * int64_t{kGemvWarps} + warp) * chunks_per_warp;
  const int64_t c_end = min(c_begin + chunks_per_warp, w.chunks);
  const float* xt = xf + r0 * stride;

  float acc[MT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
  if (quad < quads) accumulate_chunks<BITS, MT>(w, quad, quads, c_begin, c_end, xt, stride, nrows, acc);

  sum_warps<MT>(acc, [&](int m, int col, float sum) {
    const int64_t n = blockIdx.x * int64_t{kGemvColumns} + col;
    if (m < nrows && n < N) partial[(blockIdx.z * ex.rows_total + r0 + m) * N + n] = sum;
  });
}

// Sums the K splits of the gate and up halves in split order (the same order for every grid), applies SiLU(g) * u and
// gathers the result into w2's input order.
template <typename O>
__global__ void __launch_bounds__(kGatherColumns)
    silu_gather_kernel(const float* __restrict__ partial, int splits, int64_t width, MoeWna16Experts ex, int64_t stride,
                       O* __restrict__ af) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t j = blockIdx.y * int64_t{kGatherColumns} + threadIdx.x;
  if (j >= stride) return;
  const int e = __ldg(ex.row_expert + r);
  const int64_t row = packed_row_of<O>(j);
  const int32_t src = row < ex.table[e].rows ? __ldg(ex.table[e].row_source + row) : -1;
  float v = 0.0f;
  if (src >= 0) {
    const int64_t split_stride = ex.rows_total * 2 * width;
    const float* pr = partial + r * 2 * width;
    float g = 0.0f, u = 0.0f;
    for (int s = 0; s < splits; ++s) {
      g += pr[s * split_stride + src];
      u += pr[s * split_stride + width + src];
    }
    v = silu_mul(g, u);
  }
  af[r * stride + j] = from_f32<O>(v);
}

template <int BITS, int MT>
cudaError_t gemm(const MoeWna16Experts& ex, int64_t N, int64_t N_pad, int64_t max_tiles, const float* xf,
                 int64_t stride, int splits, int64_t cpw, float* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((N_pad + kGemvColumns - 1) / kGemvColumns), static_cast<unsigned>(max_tiles),
                  static_cast<unsigned>(splits));
  return launch_pdl(gemm_kernel<BITS, MT>, grid, kGemvWarps * 32, 0, stream, ex, xf, stride, N, cpw, partial);
}

template <int BITS>
cudaError_t gemm_bits(const MoeWna16Experts& ex, int64_t N, int64_t N_pad, int64_t max_tiles, const float* xf,
                      int64_t stride, int splits, int64_t cpw, float* partial, cudaStream_t stream) {
  switch (ex.tile_m) {
    case 1: return gemm<BITS, 1>(ex, N, N_pad, max_tiles, xf, stride, splits, cpw, partial, stream);
    case 2: return gemm<BITS, 2>(ex, N, N_pad, max_tiles, xf, stride, splits, cpw, partial, stream);
    case 4: return gemm<BITS, 4>(ex, N, N_pad, max_tiles, xf, stride, splits, cpw, partial, stream);
    case 8: return gemm<BITS, 8>(ex, N, N_pad, max_tiles, xf, stride, splits, cpw, partial, stream);
    default: return cudaErrorInvalidValue;
  }
}

// f(static_cast<T*>(nullptr)) with T the element type of `a` (float, __half or __nv_bfloat16).
template <typename F>
void with_act_type(Wna16Act a, F&& f) {
  switch (a) {
    case Wna16Act::F32: f(static_cast<float*>(nullptr)); break;
    case Wna16Act::F16: f(static_cast<__half*>(nullptr)); break;
    case Wna16Act::BF16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

}  // namespace

cudaError_t launch_moe_wna16_gather(const void* x, Wna16Act act, int64_t K, const int32_t* row_token,
                                    const MoeWna16Experts& ex, int64_t stride, Wna16Act out, void* xout,
                                    cudaStream_t stream) {
  if (ex.rows_total == 0) return cudaSuccess;
  dim3 grid;
  if (!gather_grid(ex.rows_total, stride, &grid) || (out != Wna16Act::F32 && stride % 8 != 0))
    return cudaErrorInvalidValue;
  with_act_type(act, [&](auto in) {
    with_act_type(out, [&](auto o) {
      using In = std::remove_pointer_t<decltype(in)>;
      using Out = std::remove_pointer_t<decltype(o)>;
      launch_pdl(gather_kernel<In, Out>, grid, kGatherColumns, 0, stream, static_cast<const In*>(x), K, row_token, ex,
                 stride, static_cast<Out*>(xout));
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_moe_wna16_gemm(const MoeWna16Experts& ex, int bits, int64_t N, int64_t N_pad, int64_t max_tiles,
                                  const float* xf, int64_t stride, int splits, int64_t chunks_per_warp, float* partial,
                                  cudaStream_t stream) {
  if (max_tiles < 1 || max_tiles > 65535 || splits < 1 || splits > 65535 || chunks_per_warp < 1)
    return cudaErrorInvalidValue;
  switch (bits) {
    case 2: return gemm_bits<2>(ex, N, N_pad, max_tiles, xf, stride, splits, chunks_per_warp, partial, stream);
    case 3: return gemm_bits<3>(ex, N, N_pad, max_tiles, xf, stride, splits, chunks_per_warp, partial, stream);
    case 4: return gemm_bits<4>(ex, N, N_pad, max_tiles, xf, stride, splits, chunks_per_warp, partial, stream);
    case 8: return gemm_bits<8>(ex, N, N_pad, max_tiles, xf, stride, splits, chunks_per_warp, partial, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_moe_wna16_silu_gather(const float* partial, int splits, int64_t width, const MoeWna16Experts& w2,
                                         int64_t stride, Wna16Act out, void* af, cudaStream_t stream) {
  if (w2.rows_total == 0) return cudaSuccess;
  dim3 grid;
  if (splits < 1 || !gather_grid(w2.rows_total, stride, &grid) || (out != Wna16Act::F32 && stride % 8 != 0))
    return cudaErrorInvalidValue;
  with_act_type(out, [&](auto o) {
    using Out = std::remove_pointer_t<decltype(o)>;
    launch_pdl(silu_gather_kernel<Out>, grid, kGatherColumns, 0, stream, partial, splits, width, w2, stride,
               static_cast<Out*>(af));
  });
  return cudaGetLastError();
}

}  // namespace qlm::cuda
