// KV-cache writes: F32 K/V rows encoded into the cache's storage type (stored = x / scale, with the
// scale of each element's kv head), bit-identical to ops::KvCache::write.
#include "runtime/ops/cuda/elem.cuh"

namespace qlm::ops::cu {
namespace {

template <ElemType CT>
__global__ void kv_write_kernel(const float* k, const float* v, int64_t stride, int64_t tokens, int64_t row_elems,
                                int64_t head_dim, void* k_cache, void* v_cache, int64_t slot0,
                                const int32_t* slot0_dev, const float* k_scales, const float* v_scales) {
  pdl_enter();
  if (slot0_dev) slot0 = *slot0_dev;
  const int64_t n = tokens * row_elems;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = idx / row_elems, i = idx % row_elems;
    const int64_t dst = (slot0 + t) * row_elems + i;
    const int64_t head = i / head_dim;
    // IEEE division (__fdiv_rn: not a reciprocal product, whatever the flags) and an exact
    // F32 store for scale 1, as the CPU cache.
    store_elem<CT>(k_cache, dst, __fdiv_rn(k[t * stride + i], k_scales[head]));
    store_elem<CT>(v_cache, dst, __fdiv_rn(v[t * stride + i], v_scales[head]));
  }
}

}  // namespace

cudaError_t launch_kv_write(const float* k, const float* v, int64_t stride, int64_t tokens, int64_t row_elems,
                            int64_t head_dim, void* k_cache, void* v_cache, ElemType cache_type, int64_t slot0,
                            const int32_t* slot0_dev, const float* k_scales, const float* v_scales,
                            cudaStream_t stream) {
  const int64_t n = tokens * row_elems;
  if (n == 0) return cudaSuccess;
  if (head_dim <= 0 || row_elems % head_dim != 0) return cudaErrorInvalidValue;
  return dispatch_kv(cache_type, [&](auto tag) {
    launch_pdl(kv_write_kernel<decltype(tag)::value>, grid_for(n, 256), 256, 0, stream, k, v, stride, tokens, row_elems,
               head_dim, k_cache, v_cache, slot0, slot0_dev, k_scales, v_scales);
  });
}

}  // namespace qlm::ops::cu
