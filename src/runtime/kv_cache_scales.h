// The KV-cache methods of a rank (quant/kv_cache): one per attention layer. A format whose
// checkpoints carry k/v scales (ModelOpt kv_cache_quant_algo FP8, compressed-tensors kv_cache_scheme,
// serialized fp8) gives each attention layer a method, which registers every checkpoint spelling of
// its layer's scales with the rank's modules so the loader consumes them. With an fp8 cache and a
// format without KV scales every layer still gets a method (scales 1.0), so the load reports it.
// After loading, the scales (per tensor or per kv head, this rank's heads) go to the rank's cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "quant/kv_cache/kv_cache_method.h"
#include "runtime/ops/kv_cache.h"

namespace qlm::models {
class DecoderModel;
}

namespace qlm::runtime {

struct KvCacheLayerMethod {
  int64_t layer = 0;
  std::unique_ptr<KVCacheQuantMethod> method;
};
using KvCacheMethods = std::vector<KvCacheLayerMethod>;

// The storage of a --kv-cache-dtype choice: auto is the activation dtype (F32 / F16 / BF16).
ops::KvDType kv_storage_dtype(KVCacheDType requested, DType act_dtype);
// What --kv-cache-dtype auto means with this checkpoint: fp8_e4m3 for a compressed-tensors
// kv_cache_scheme (vLLM), otherwise Auto. Other choices are returned as they are.
KVCacheDType resolve_kv_cache_dtype(KVCacheDType requested, const QuantizationConfig* quant);

// `cache_dtype` is the resolved choice (not Auto); `shape_of` gives checkpoint tensor shapes, so
// per-head scales are declared with their shape (and wrong shapes named at once).
KvCacheMethods attach_kv_cache_methods(models::DecoderModel& rank, const QuantizationConfig* quant,
                                       const QuantContext& ctx, KVCacheDType cache_dtype,
                                       const ScaleShapeLookup& shape_of = {});

// After loading: validates every loaded scale ("kv_cache.scale" naming the layer) and, for an fp8
// cache, hands each layer's scales for this rank's kv heads to the rank's KV cache.
void finish_kv_cache_methods(KvCacheMethods& methods, models::DecoderModel& rank);

// kv_scale_report over one rank's methods ("KV cache auto (model dtype)" when there are none).
std::string kv_cache_report(const KvCacheMethods& methods);

}  // namespace qlm::runtime
