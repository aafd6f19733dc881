#include "runtime/kv_cache_scales.h"

#include <fmt/format.h>

#include "models/decoder_model.h"

namespace qlm::runtime {

KvCacheMethods attach_kv_cache_methods(models::DecoderModel& rank, const QuantizationConfig* quant,
                                       const QuantContext& ctx) {
  KvCacheMethods out;
  if (quant == nullptr) return out;
  for (int64_t i = 0; i < rank.config().num_layers; ++i) {
    LayerInfo info;
    info.kind = LayerInfo::Kind::Attention;
    info.prefix = fmt::format("model.layers.{}.self_attn", i);
    std::unique_ptr<KVCacheMethod> method = quant->get_kv_cache_method(info, ctx);
    if (!method) continue;
    auto* kv = dynamic_cast<KVCacheQuantMethod*>(method.get());
    QLM_CHECK(kv != nullptr);  // the only KV-cache method there is
    method.release();
    out.emplace_back(kv);
    kv->register_params(rank.modules());
  }
  return out;
}

void finish_kv_cache_methods(KvCacheMethods& methods) {
  for (auto& m : methods) m->process_weights_after_loading();
}

}  // namespace qlm::runtime
