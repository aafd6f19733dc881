#include "quant/compressed_tensors/ct_wna16_method.h"

#include "quant/packing.h"

namespace qlm {

CtWNA16LinearMethod::CtWNA16LinearMethod(WNA16Scheme scheme) : WNA16LinearMethod("compressed-tensors", scheme) {}

void CtWNA16LinearMethod::check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const {
  const int64_t P = 32 / scheme().bits;
  if (geo.row_parallel && geo.K_p % P != 0)
    fail("quant.partition", {.file = {}, .tensor = {}, .layer = layer.prefix()}, "use a smaller tensor-parallel size",
         "weight_packed packs {} input columns per int32 word, but this rank's in_features K_p = {} "
         "(K = {}, tensor-parallel size {}) is not a multiple of it",
         P, geo.K_p, geo.K, geo.tp_size);
  // Zero points are packed along N: every fused part must start on a word boundary.
  const bool split_n = geo.output_partition_sizes.size() > 1 || geo.N_p != geo.N;
  if (!scheme().symmetric && split_n)
    for (int64_t part : geo.output_partition_sizes)
      if (part % P != 0)
        fail("quant.partition", {.file = {}, .tensor = {}, .layer = layer.prefix()},
             "use a smaller tensor-parallel size",
             "weight_zero_point packs {} output rows per int32 word, but an output partition of this rank "
             "has {} rows (N = {}, tensor-parallel size {})",
             P, part, geo.N, geo.tp_size);
}

void CtWNA16LinearMethod::declare_params(LinearLayer& layer, const WNA16Geometry& geo) const {
  const int bits = scheme().bits;
  const int64_t P = 32 / bits;
  const PackFactor pf{32, bits};
  Parameter packed("weight_packed", ParamKind::PackedWeight, {geo.N_p, (geo.K_p + P - 1) / P}, DType::I32);
  packed.input_dim = 1;
  packed.output_dim = 0;
  packed.packed_dim = 1;
  packed.packed_factor = pf;
  layer.add_param(std::move(packed));

  Parameter scale("weight_scale", geo.replicate_scales ? ParamKind::ChannelScale : ParamKind::GroupScale,
                  {geo.N_p, geo.scale_rows}, DType::F32);
  scale.input_dim = geo.replicate_scales ? -1 : 1;
  scale.output_dim = 0;
  layer.add_param(std::move(scale));

  if (!scheme().symmetric) {
    Parameter zp("weight_zero_point", geo.replicate_scales ? ParamKind::PackedColumn : ParamKind::PackedWeight,
                 {(geo.N_p + P - 1) / P, geo.scale_rows}, DType::I32);
    zp.input_dim = geo.replicate_scales ? -1 : 1;
    zp.output_dim = 0;
    zp.packed_dim = 0;
    zp.packed_factor = pf;
    layer.add_param(std::move(zp));
  }
  if (scheme().act_order) {
    Parameter g_idx("weight_g_idx", ParamKind::RowVector, {geo.K_p}, DType::I32);
    g_idx.input_dim = 0;
    layer.add_param(std::move(g_idx));
  }
  // weight_shape is the [N, K] of one logical matrix, so a fused layer holds one row per part
  // ([N_q, K], [N_k, K], ...).
  const auto parts = static_cast<int64_t>(geo.output_partition_sizes.size());
  Parameter shape("weight_shape", ParamKind::Replicated, parts > 1 ? Shape{parts, 2} : Shape{2}, DType::I64);
  layer.add_param(std::move(shape));
}

WNA16Weights CtWNA16LinearMethod::to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const {
  const WNA16Scheme& s = scheme();
  const std::string& name = layer.prefix();
  // weight_shape is the unpartitioned [N, K] of each logical matrix; a fused layer has one row per
  // part, whose N is that part's, so only K is checked there.
  const Tensor shape = layer.param("weight_shape").data().contiguous();
  const bool fused = shape.dim() == 2;
  const int64_t rows = fused ? shape.size(0) : 1;
  const auto* dims = shape.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t shape_n = dims[2 * r], shape_k = dims[2 * r + 1];
    if (shape_k != geo.K || (!fused && shape_n != geo.N))
      fail("weights.shape", {.file = {}, .tensor = "weight_shape", .layer = name},
           "the checkpoint does not match config.json (hidden/intermediate sizes)",
           "weight_shape is [{}, {}] but layer {} is [N = {}, K = {}]", shape_n, shape_k, name, geo.N, geo.K);
  }

  WNA16Weights w;
  w.weight_type = s.weight_type();
  w.K = geo.K_p;
  w.N = geo.N_p;
  w.group_size = geo.group_rows;
  // [N_p, K_p] codes -> GPTQ layout [K_p*b/32, N_p]; symmetric codes keep their +2^(b-1) offset,
  // which is exactly the type bias.
  if (32 % s.bits == 0) {
    w.qweight = cols_to_rows_packed(layer.param("weight_packed").data(), geo.K_p, s.bits);
  } else {
    const std::vector<uint8_t> codes = unpack_cols(layer.param("weight_packed").data(), geo.K_p, s.bits);
    w.qweight = pack_rows(transpose_codes(codes, geo.N_p, geo.K_p), geo.K_p, geo.N_p, s.bits);
  }
  w.scales = transpose_f32(layer.param("weight_scale").data());
  if (!s.symmetric) {
    const std::vector<uint8_t> z = unpack_rows(layer.param("weight_zero_point").data(), geo.N_p, s.bits);
    w.zeros = codes_to_i32(transpose_codes(z, geo.N_p, geo.scale_rows), geo.scale_rows, geo.N_p);
  }
  return w;
}

}  // namespace qlm
