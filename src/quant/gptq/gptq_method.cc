#include "quant/gptq/gptq_method.h"

#include "quant/packing.h"

namespace qlm {

const char* gptq_zero_convention_name(GptqZeroConvention c) {
  switch (c) {
    case GptqZeroConvention::V1: return "gptq (v1: zero = stored + 1)";
    case GptqZeroConvention::V2: return "gptq_v2 (zero = stored)";
  }
  return "?";
}

GptqLinearMethod::GptqLinearMethod(WNA16Scheme scheme, GptqZeroConvention convention)
    : WNA16LinearMethod("gptq", scheme), convention_(convention) {}

void GptqLinearMethod::check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const {
  const int bits = scheme().bits;
  const int64_t unit = bits == 3 ? 32 : 32 / bits;  // values per whole number of int32 words
  if (geo.K_p % unit != 0)
    fail("quant.partition", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         geo.row_parallel ? "use a smaller tensor-parallel size" : "the checkpoint cannot be GPTQ-packed at this size",
         "GPTQ {}-bit qweight packs {} input rows per word group, but this rank's in_features K_p = {} "
         "(K = {}, tensor-parallel size {}) is not a multiple of it",
         bits, unit, geo.K_p, geo.K, geo.tp_size);
  for (int64_t part : geo.output_partition_sizes)
    if (part % unit != 0)
      fail("quant.partition", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "use a smaller tensor-parallel size",
           "GPTQ {}-bit qzeros pack {} output columns per word group, but an output partition of this "
           "rank has {} columns (tensor-parallel size {})",
           bits, unit, part, geo.tp_size);
}

void GptqLinearMethod::declare_params(LinearLayer& layer, const WNA16Geometry& geo) const {
  const int bits = scheme().bits;
  const PackFactor pf{32, bits};
  Parameter qweight("qweight", ParamKind::PackedWeight, {geo.K_p * bits / 32, geo.N_p}, DType::I32);
  qweight.input_dim = 0;
  qweight.output_dim = 1;
  qweight.packed_dim = 0;
  qweight.packed_factor = pf;
  layer.add_param(std::move(qweight));

  Parameter g_idx("g_idx", ParamKind::RowVector, {geo.K_p}, DType::I32);
  g_idx.input_dim = 0;
  g_idx.optional = !scheme().act_order;
  layer.add_param(std::move(g_idx));

  const int64_t zcols = geo.N_p * bits / 32;
  if (geo.replicate_scales) {
    Parameter scales("scales", ParamKind::ChannelScale, {geo.scale_rows, geo.N_p}, DType::F32);
    scales.output_dim = 1;
    layer.add_param(std::move(scales));
    Parameter qzeros("qzeros", ParamKind::PackedColumn, {geo.scale_rows, zcols}, DType::I32);
    qzeros.output_dim = 1;
    qzeros.packed_dim = 1;
    qzeros.packed_factor = pf;
    layer.add_param(std::move(qzeros));
  } else {
    Parameter scales("scales", ParamKind::GroupScale, {geo.scale_rows, geo.N_p}, DType::F32);
    scales.input_dim = 0;
    scales.output_dim = 1;
    layer.add_param(std::move(scales));
    Parameter qzeros("qzeros", ParamKind::PackedWeight, {geo.scale_rows, zcols}, DType::I32);
    qzeros.input_dim = 0;
    qzeros.output_dim = 1;
    qzeros.packed_dim = 1;
    qzeros.packed_factor = pf;
    layer.add_param(std::move(qzeros));
  }
}

WNA16Weights GptqLinearMethod::to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const {
  const WNA16Scheme& s = scheme();
  const std::string& name = layer.prefix();
  WNA16Weights w;
  w.weight_type = s.weight_type();
  w.K = geo.K_p;
  w.N = geo.N_p;
  w.group_size = geo.group_rows;
  w.qweight = layer.param("qweight").data().contiguous();
  w.scales = layer.param("scales").data().contiguous();

  const std::vector<uint8_t> stored = unpack_cols(layer.param("qzeros").data(), geo.N_p, s.bits);
  const int offset = convention_ == GptqZeroConvention::V1 ? 1 : 0;
  if (s.symmetric) {
    // The zero is implied by the type (2^(b-1)); the stored zeros must agree, which also catches
    // checkpoints whose checkpoint_format mislabels the v1/v2 convention (RELIABILITY.md A5, T4).
    const int mid = 1 << (s.bits - 1);
    const int want = mid - offset, other = mid - (1 - offset);
    bool all_other = true;
    size_t bad = stored.size();
    for (size_t i = 0; i < stored.size(); ++i) {
      if (stored[i] != other) all_other = false;
      if (stored[i] != want && bad == stored.size()) bad = i;
    }
    if (bad != stored.size()) {
      if (all_other)
        fail("weights.zero_point_convention", {.file = {}, .tensor = "qzeros", .layer = name},
             fmt::format("set checkpoint_format to \"{}\" in the quantization config if the checkpoint really is {}",
                         offset ? "gptq_v2" : "gptq", offset ? "v2" : "v1"),
             "symmetric {}-bit GPTQ qzeros store {} everywhere, which is the {} convention, but the config declares "
             "checkpoint_format {}; decoding it as declared would shift every weight by one step",
             s.bits, other, offset ? "gptq_v2 (stored = zero)" : "gptq v1 (stored = zero - 1)",
             gptq_zero_convention_name(convention_));
      const int64_t cols = geo.N_p;
      fail("weights.zero_point", {.file = {}, .tensor = "qzeros", .layer = name},
           "the checkpoint looks asymmetric: set sym to false in the quantization config",
           "symmetric {}-bit GPTQ requires every stored zero point to be {} under checkpoint_format {}, but group {} "
           "column {} stores {}",
           s.bits, want, gptq_zero_convention_name(convention_), bad / cols, bad % cols, stored[bad]);
    }
  } else {
    w.zeros = codes_to_i32(stored, geo.scale_rows, geo.N_p, offset);
    check_zero_points(w.zeros, s.bits, name, "qzeros",
                      offset ? "stored + 1, checkpoint_format gptq (v1)" : "stored, checkpoint_format gptq_v2");
  }
  return w;
}

}  // namespace qlm
