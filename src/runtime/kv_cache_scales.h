// The format's KV-cache methods (quant/kv_cache): one per attention layer of a rank, for formats
// whose checkpoints carry k/v scales (ModelOpt kv_cache_quant_algo FP8, ...). Each registers every
// checkpoint spelling of its layer's scales with the rank's modules, so the loader consumes them.
#pragma once

#include <memory>
#include <vector>

#include "quant/kv_cache/kv_cache_method.h"

namespace qlm::models {
class DecoderModel;
}

namespace qlm::runtime {

using KvCacheMethods = std::vector<std::unique_ptr<KVCacheQuantMethod>>;

// Empty when `quant` is null or gives attention layers no KV-cache method.
KvCacheMethods attach_kv_cache_methods(models::DecoderModel& rank, const QuantizationConfig* quant,
                                       const QuantContext& ctx);

// After loading: validates every loaded scale ("kv_cache.scale" naming the layer). The cache keeps
// its 1.0 scales: they only matter for fp8 storage, which ops::KvCache does not offer yet.
void finish_kv_cache_methods(KvCacheMethods& methods);

}  // namespace qlm::runtime
