#include "runtime/kv_cache_scales.h"

#include <fmt/format.h>

#include "models/decoder_model.h"
#include "quant/compressed_tensors/ct_config.h"

namespace qlm::runtime {

ops::KvDType kv_storage_dtype(KVCacheDType requested, DType act_dtype) {
  switch (requested) {
    case KVCacheDType::Auto:
      switch (act_dtype) {
        case DType::F16: return ops::KvDType::F16;
        case DType::BF16: return ops::KvDType::BF16;
        default: return ops::KvDType::F32;
      }
    case KVCacheDType::F32: return ops::KvDType::F32;
    case KVCacheDType::F16: return ops::KvDType::F16;
    case KVCacheDType::BF16: return ops::KvDType::BF16;
    case KVCacheDType::Fp8E4M3: return ops::KvDType::F8E4M3;
    case KVCacheDType::Fp8E5M2: return ops::KvDType::F8E5M2;
  }
  return ops::KvDType::F32;
}

KVCacheDType resolve_kv_cache_dtype(KVCacheDType requested, const QuantizationConfig* quant) {
  if (requested != KVCacheDType::Auto) return requested;
  const auto* ct = dynamic_cast<const CompressedTensorsConfig*>(quant);
  return ct && ct->has_kv_cache_scheme() ? KVCacheDType::Fp8E4M3 : KVCacheDType::Auto;
}

KvCacheMethods attach_kv_cache_methods(models::DecoderModel& rank, const QuantizationConfig* quant,
                                       const QuantContext& ctx, KVCacheDType cache_dtype,
                                       const ScaleShapeLookup& shape_of) {
  KvCacheMethods out;
  const models::ModelConfig& c = rank.config();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerInfo info;
    info.kind = LayerInfo::Kind::Attention;
    info.prefix = fmt::format("model.layers.{}.self_attn", i);
    std::unique_ptr<KVCacheMethod> method = quant ? quant->get_kv_cache_method(info, ctx) : nullptr;
    std::unique_ptr<KVCacheQuantMethod> kv;
    const bool from_format = method != nullptr;
    if (from_format) {
      kv.reset(dynamic_cast<KVCacheQuantMethod*>(method.get()));
      QLM_CHECK(kv != nullptr);  // the only KV-cache method there is
      method.release();
    } else if (kv_cache_dtype_is_fp8(cache_dtype)) {
      // The format declares no KV scales: the checkpoint's tensors are not ours to consume.
      kv = std::make_unique<KVCacheQuantMethod>(info.prefix, cache_dtype);
    } else {
      continue;
    }
    kv->set_dtype(cache_dtype);
    kv->set_head_counts(c.num_heads, c.num_kv_heads);
    if (from_format) kv->register_params(rank.modules(), shape_of);
    out.push_back(KvCacheLayerMethod{i, std::move(kv)});
  }
  return out;
}

void finish_kv_cache_methods(KvCacheMethods& methods, models::DecoderModel& rank) {
  for (KvCacheLayerMethod& m : methods) {
    m.method->process_weights_after_loading();
    if (!m.method->quantized()) continue;  // F32 / F16 / BF16 storage keeps scale 1
    const int64_t first = rank.first_kv_head(), count = rank.kv_heads();
    rank.set_kv_cache_scales(m.layer, m.method->k_scales(first, count), m.method->v_scales(first, count));
  }
}

std::string kv_cache_report(const KvCacheMethods& methods) {
  std::vector<const KVCacheQuantMethod*> view;
  for (const KvCacheLayerMethod& m : methods) view.push_back(m.method.get());
  return kv_scale_report(view);
}

}  // namespace qlm::runtime
