// Element-wise runtime kernels: embedding gather, residual add, conversion to F32, SiLU·mul. Each lets the next
// kernel launch before it waits for the previous one (pdl_enter_next_first): SiLU·mul's successor is the down
// projection, whose weights then start to stream while the gate/up GEMM ends.
#include "kernels/cuda/silu_mul.cuh"
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

template <ElemType TableT, ElemType OutT>
__global__ void embedding_kernel(const void* table, const int32_t* ids, int64_t rows, int64_t hidden, void* out) {
  pdl_enter_next_first();
  const int64_t n = rows * hidden;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / hidden, c = i % hidden;
    store_elem<OutT>(out, i, load_elem<TableT>(table, int64_t{ids[r]} * hidden + c));
  }
}

template <ElemType YT>
__global__ void add_residual_kernel(float* x, const void* y, int64_t n) {
  pdl_enter_next_first();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] += load_elem<YT>(y, i);
}

template <ElemType XT>
__global__ void to_f32_kernel(const void* x, float* out, int64_t n) {
  pdl_enter_next_first();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = load_elem<XT>(x, i);
}

template <ElemType T>
__global__ void silu_and_mul_kernel(const void* gate_up, void* out, int64_t rows, int64_t width) {
  pdl_enter_next_first();
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    const float g = load_elem<T>(gate_up, r * 2 * width + c);
    const float u = load_elem<T>(gate_up, r * 2 * width + width + c);
    store_elem<T>(out, i, cuda::silu_mul(g, u));
  }
}

constexpr int kBlock = 256;

}  // namespace

cudaError_t launch_embedding(const void* table, ElemType table_type, const int32_t* ids, int64_t rows,
                             int64_t hidden, void* out, ElemType out_type, cudaStream_t stream) {
  if (rows * hidden == 0) return cudaSuccess;
  const unsigned grid = grid_for(rows * hidden, kBlock);
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch(table_type, [&](auto table_tag) {
    status = dispatch(out_type, [&](auto out_tag) {
      launch_pdl(embedding_kernel<decltype(table_tag)::value, decltype(out_tag)::value>, grid, kBlock, 0, stream, table,
                 ids, rows, hidden, out);
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

cudaError_t launch_add_residual(float* x, const void* y, ElemType y_type, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch(y_type, [&](auto tag) {
    launch_pdl(add_residual_kernel<decltype(tag)::value>, grid_for(n, kBlock), kBlock, 0, stream, x, y, n);
  });
}

cudaError_t launch_to_f32(const void* x, ElemType x_type, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch(x_type, [&](auto tag) {
    launch_pdl(to_f32_kernel<decltype(tag)::value>, grid_for(n, kBlock), kBlock, 0, stream, x, out, n);
  });
}

cudaError_t launch_silu_and_mul(const void* gate_up, void* out, ElemType type, int64_t rows, int64_t width,
                                cudaStream_t stream) {
  if (rows * width == 0) return cudaSuccess;
  return dispatch(type, [&](auto tag) {
    launch_pdl(silu_and_mul_kernel<decltype(tag)::value>, grid_for(rows * width, kBlock), kBlock, 0, stream, gate_up,
               out, rows, width);
  });
}

}  // namespace qlm::ops::cu
