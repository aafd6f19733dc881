#include "quant/awq/awq_method.h"

#include "quant/packing.h"

namespace qlm {

AwqLinearMethod::AwqLinearMethod(WNA16Scheme scheme) : WNA16LinearMethod("awq", scheme) {
  QLM_CHECK(scheme.bits == 4 && !scheme.symmetric && !scheme.act_order);
}

void AwqLinearMethod::check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const {
  for (int64_t part : geo.output_partition_sizes)
    if (part % 8 != 0)
      fail("quant.partition", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "use a smaller tensor-parallel size",
           "AWQ packs 8 output columns per int32 word, but an output partition of this rank has {} columns "
           "(N = {}, tensor-parallel size {}); the output size is not aligned with the quantized weight shape",
           part, geo.N, geo.tp_size);
}

void AwqLinearMethod::declare_params(LinearLayer& layer, const WNA16Geometry& geo) const {
  const PackFactor pf{32, 4};
  Parameter qweight("qweight", ParamKind::PackedWeight, {geo.K_p, geo.N_p / 8}, DType::I32);
  qweight.input_dim = 0;
  qweight.output_dim = 1;
  qweight.packed_dim = 1;
  qweight.packed_factor = pf;
  layer.add_param(std::move(qweight));

  Parameter scales("scales", geo.replicate_scales ? ParamKind::ChannelScale : ParamKind::GroupScale,
                   {geo.scale_rows, geo.N_p}, DType::F32);
  scales.input_dim = geo.replicate_scales ? -1 : 0;
  scales.output_dim = 1;
  layer.add_param(std::move(scales));

  Parameter qzeros("qzeros", geo.replicate_scales ? ParamKind::PackedColumn : ParamKind::PackedWeight,
                   {geo.scale_rows, geo.N_p / 8}, DType::I32);
  qzeros.input_dim = geo.replicate_scales ? -1 : 0;
  qzeros.output_dim = 1;
  qzeros.packed_dim = 1;
  qzeros.packed_factor = pf;
  layer.add_param(std::move(qzeros));
}

WNA16Weights AwqLinearMethod::to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const {
  WNA16Weights w;
  w.weight_type = scheme().weight_type();
  w.K = geo.K_p;
  w.N = geo.N_p;
  w.group_size = geo.group_rows;
  w.qweight = awq_to_rows_packed(layer.param("qweight").data(), geo.N_p);  // [K_p, N_p / 8] -> [K_p / 8, N_p]
  w.scales = layer.param("scales").data().contiguous();
  // AWQ stores the true zero point (no -1 as in GPTQ v1); every 4-bit field is in range.
  w.zeros = codes_to_i32(awq_unpack(layer.param("qzeros").data(), geo.N_p), geo.scale_rows, geo.N_p);
  return w;
}

}  // namespace qlm
