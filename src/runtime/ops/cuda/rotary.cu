// Rotary embedding in place on F32 q/k rows with host-computed angles (ops::rope_angles).
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

// One thread per (token, head, i < half): the pair (i, i + half) is rotated by angle (t, i).
__global__ void rotary_kernel(float* x, int64_t row_stride, int64_t tokens, int64_t heads, int64_t head_dim,
                              const float* cos, const float* sin, int64_t half) {
  pdl_enter();
  const int64_t n = tokens * heads * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx % half, h = (idx / half) % heads, t = idx / (half * heads);
    float* v = x + t * row_stride + h * head_dim;
    const float c = cos[t * half + i], s = sin[t * half + i];
    const float x1 = v[i], x2 = v[i + half];
    // Rounded products and sums, never contracted into FMAs: the CPU's ops::apply_rope values, and
    // prepare_attention's.
    v[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    v[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

}  // namespace

cudaError_t launch_rotary(float* x, int64_t row_stride, int64_t tokens, int64_t heads, int64_t head_dim,
                          const float* cos, const float* sin, int64_t half, cudaStream_t stream) {
  const int64_t n = tokens * heads * half;
  if (n == 0) return cudaSuccess;
  return launch_pdl(rotary_kernel, grid_for(n, 256), 256, 0, stream, x, row_stride, tokens, heads, head_dim, cos, sin,
                    half);
}

}  // namespace qlm::ops::cu
