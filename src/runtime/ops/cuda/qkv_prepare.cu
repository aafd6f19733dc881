// The step between a layer's qkv projection and its attention, as one kernel: for every token and q / k
// head, the head vector widened to F32, the per-head RMSNorm where weights are given (Qwen3's q_norm /
// k_norm; sum of squares in double as ops::rms_norm), rotary (rotate-half pairs i, i + half with the
// host's angles, as ops::apply_rope); then q into an F32 tensor for attention and k, with the head's v,
// into the KV cache (stored = x / scale by IEEE division, as the cache write). One block per (token,
// head), a thread per element. It replaces the widening, the two head norms, rotary and the cache write:
// three or five launches per layer and the F32 copy of the whole qkv output.
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

template <ElemType IN, ElemType CT>
__global__ void __launch_bounds__(kMaxAttentionHeadDim) qkv_prepare_kernel(QkvPrepareArgs a) {
  pdl_enter();
  const int64_t heads = a.heads + a.kv_heads;  // q heads, then k heads: adjacent columns of qkv
  const int64_t t = blockIdx.x / heads, hh = blockIdx.x % heads;
  const bool is_q = hh < a.heads;
  const int d = static_cast<int>(a.head_dim), half = static_cast<int>(a.half);
  const int64_t stride = (a.heads + 2 * a.kv_heads) * a.head_dim;
  const int i = threadIdx.x;
  __shared__ float xs[kMaxAttentionHeadDim];
  __shared__ double partial[kMaxAttentionHeadDim / 32];

  float x = i < d ? load_elem<IN>(a.qkv, t * stride + hh * a.head_dim + i) : 0.0f;
  const float* weight = is_q ? a.q_norm : a.k_norm;
  if (weight != nullptr) {  // the same for the whole block
    double sum = static_cast<double>(x) * x;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (i % 32 == 0) partial[i / 32] = sum;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
    const float inv = static_cast<float>(1.0 / sqrt(total / static_cast<double>(d) + a.eps));
    if (i < d) x = weight[i] * (x * inv);
  }
  if (i < d) xs[i] = x;
  __syncthreads();
  if (i >= d) return;
  float y = x;
  if (i < half) {  // rounded products and sums, no FMA: rotary.cu's and the CPU's values
    const float c = a.cos[t * half + i], s = a.sin[t * half + i];
    y = __fsub_rn(__fmul_rn(xs[i], c), __fmul_rn(xs[i + half], s));
  } else if (i < 2 * half) {
    const int j = i - half;
    const float c = a.cos[t * half + j], s = a.sin[t * half + j];
    y = __fadd_rn(__fmul_rn(xs[i], c), __fmul_rn(xs[j], s));
  }
  if (is_q) {
    a.q_out[t * a.heads * a.head_dim + hh * a.head_dim + i] = y;
    return;
  }
  const int64_t kh = hh - a.heads;
  const int64_t slot0 = a.slot0_dev ? int64_t{*a.slot0_dev} : a.slot0;
  const int64_t dst = (slot0 + t) * a.kv_heads * a.head_dim + kh * a.head_dim + i;
  store_elem<CT>(a.k_cache, dst, __fdiv_rn(y, a.k_scales[kh]));
  const float v = load_elem<IN>(a.qkv, t * stride + (a.heads + a.kv_heads + kh) * a.head_dim + i);
  store_elem<CT>(a.v_cache, dst, __fdiv_rn(v, a.v_scales[kh]));
}

}  // namespace

cudaError_t launch_qkv_prepare(const QkvPrepareArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.head_dim <= 0 || a.head_dim > kMaxAttentionHeadDim || a.half < 0 || 2 * a.half > a.head_dim || a.heads <= 0 ||
      a.kv_heads <= 0 || a.tokens * (a.heads + a.kv_heads) > int64_t{0x7fffffff})
    return cudaErrorInvalidValue;
  const unsigned threads = static_cast<unsigned>((a.head_dim + 31) / 32 * 32);
  const unsigned blocks = static_cast<unsigned>(a.tokens * (a.heads + a.kv_heads));
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch(a.qkv_type, [&](auto in_tag) {
    status = dispatch_kv(a.cache_type, [&](auto cache_tag) {
      launch_pdl(qkv_prepare_kernel<decltype(in_tag)::value, decltype(cache_tag)::value>, blocks, threads, 0, stream,
                 a);
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

}  // namespace qlm::ops::cu
