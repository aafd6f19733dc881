#include "quant/w8a8_method.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/float_convert.h"
#include "quant/online/online_quantize.h"

namespace qlm {

const char* online_quant_name(OnlineQuant q) {
  switch (q) {
    case OnlineQuant::None: return "none";
    case OnlineQuant::Fp8PerTensor: return "fp8 per-tensor";
    case OnlineQuant::Fp8PerChannel: return "fp8 per-channel";
    case OnlineQuant::Int8PerChannel: return "int8 per-channel";
  }
  return "?";
}

std::string W8A8Scheme::describe() const {
  std::string w = weight_scale_kind_name(weight_scale);
  if (weight_scale == WeightScaleKind::Block) w += fmt::format("({}x{})", block_n, block_k);
  std::string a = act_scheme_name(act);
  if (act == ActScheme::DynamicTokenGroup) a += fmt::format("({})", block_k);
  std::string s = fmt::format("{} w={} act={}{}", w8_type_name(weight_type), w, a, act_symmetric ? "" : " asym");
  if (online != OnlineQuant::None) s += fmt::format(" (online {})", online_quant_name(online));
  return s;
}

void check_positive_scale(float v, const std::string& layer, const std::string& tensor, const std::string& where,
                          bool activation) {
  if (std::isfinite(v) && v > 0) return;
  fail(activation ? "weights.input_scale" : "weights.scale", {.file = {}, .tensor = tensor, .layer = layer},
       "the checkpoint is corrupt (scales are dequantization multipliers and must be finite and > 0); re-export it",
       "{} {} is {}; {} scales must be finite and > 0", tensor, where, v, activation ? "activation" : "weight");
}

void check_fp8_codes(const Tensor& codes, const std::string& layer, const std::string& tensor) {
  const Tensor c = codes.contiguous();
  auto v = c.span<uint8_t>();
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < v.size(); ++i)
    if (e4m3_is_nan(v[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  if (count == 0) return;
  const int64_t cols = c.dim() == 2 ? c.size(1) : 1;
  fail("weights.fp8_nan", {.file = {}, .tensor = tensor, .layer = layer},
       "the checkpoint is corrupt: float8_e4m3fn weights have no NaN values in a valid export; re-export it",
       "{} holds {} NaN code(s) (0x7F / 0xFF) of {} fp8 weights; the first is at [{}, {}]", tensor, count, v.size(),
       first / cols, first % cols);
}

W8A8LinearMethod::W8A8LinearMethod(std::string format, W8A8Scheme scheme)
    : format_(std::move(format)), scheme_(std::move(scheme)) {}

std::string W8A8LinearMethod::describe() const {
  std::string s = fmt::format("{} {}", format_, scheme_.describe());
  if (!kernel_.name().empty()) s += fmt::format(" [{}]", kernel_.name());
  return s;
}

void W8A8LinearMethod::create_weights(LinearLayer& layer, int64_t K_p,
                                      const std::vector<int64_t>& output_partition_sizes, int64_t K, int64_t N,
                                      DType params_dtype) {
  const W8A8Scheme& s = scheme_;
  K_ = K;
  N_ = N;
  K_p_ = K_p;
  parts_ = output_partition_sizes;
  N_p_ = std::accumulate(parts_.begin(), parts_.end(), int64_t{0});
  row_parallel_ = K_p != K;
  tp_rank_ = layer.tp().rank;
  const auto n_parts = static_cast<int64_t>(parts_.size());
  const std::string& name = layer.prefix();

  if (s.online != OnlineQuant::None) {
    const DTypeInfo& info = dtype_info(params_dtype);
    if (!info.is_float || info.bits < 16)
      fail("layer.dtype", {.file = {}, .tensor = {}, .layer = name},
           "online quantization takes a float32, float16 or bfloat16 checkpoint",
           "online {} quantization needs F32, F16 or BF16 weights, got {}", online_quant_name(s.online), info.name);
    Parameter w("weight", ParamKind::Weight, {N_p_, K_p}, params_dtype);
    w.input_dim = 1;
    w.output_dim = 0;
    layer.add_param(std::move(w));
  } else {
    Parameter w("weight", ParamKind::Weight, {N_p_, K_p}, s.weight_type == W8Type::Int8 ? DType::I8 : DType::F8_E4M3);
    w.input_dim = 1;
    w.output_dim = 0;
    layer.add_param(std::move(w));
    switch (s.weight_scale) {
      case WeightScaleKind::Tensor:
        layer.add_param(Parameter("weight_scale", ParamKind::PerTensorScale, {n_parts}, DType::F32));
        break;
      case WeightScaleKind::Channel: {
        Parameter p("weight_scale", ParamKind::ChannelScale, s.channel_scale_1d ? Shape{N_p_} : Shape{N_p_, 1},
                    DType::F32);
        p.output_dim = 0;
        layer.add_param(std::move(p));
        break;
      }
      case WeightScaleKind::Block: {
        const bool fused = n_parts > 1;
        replicated_block_grid_ = !fused;
        if (replicated_block_grid_) {
          // Unfused layers hold the whole grid and slice it here, so a rank's slice need not start
          // on a block boundary (RELIABILITY.md row 16).
          const int64_t rows_full = layer.spec().kind == LinearKind::Row ? N : N;
          layer.add_param(Parameter(s.block_scale_name, ParamKind::Replicated,
                                    {(rows_full + s.block_n - 1) / s.block_n, (K + s.block_k - 1) / s.block_k},
                                    DType::F32));
        } else {
          // Fused parts: part i's grid starts at row ceil(offset_i / block_n) (vLLM's merged loader).
          int64_t rows = 0, off = 0;
          for (int64_t part : parts_) {
            rows = std::max(rows, (off + s.block_n - 1) / s.block_n + (part + s.block_n - 1) / s.block_n);
            off += part;
          }
          Parameter p(s.block_scale_name, ParamKind::BlockScale, {rows, (K_p + s.block_k - 1) / s.block_k}, DType::F32);
          p.input_dim = 1;
          p.output_dim = 0;
          p.block_n = s.block_n;
          p.block_k = s.block_k;
          layer.add_param(std::move(p));
        }
        break;
      }
    }
    if (s.act == ActScheme::StaticTensor) {
      layer.add_param(Parameter("input_scale", ParamKind::PerTensorScale, {n_parts}, DType::F32));
      if (!s.act_symmetric)
        layer.add_param(Parameter("input_zero_point", ParamKind::PerTensorScale, {n_parts}, DType::I8));
    }
  }

  ScaledMMConfig cfg;
  cfg.K_p = K_p;
  cfg.N_p = N_p_;
  cfg.weight_type = s.weight_type;
  cfg.weight_scale = s.weight_scale;
  if (s.weight_scale == WeightScaleKind::Tensor && n_parts > 1 && s.fused == FusedTensorScale::Channelwise)
    cfg.weight_scale = WeightScaleKind::Channel;
  cfg.block_n = s.block_n;
  cfg.block_k = s.block_k;
  cfg.act = s.act;
  cfg.act_group = s.act == ActScheme::DynamicTokenGroup ? s.block_k : 0;
  cfg.act_symmetric = s.act_symmetric;
  kernel_.choose(layer, cfg, format_, "scaled-mm linear");
}

// The weight codes of this rank, quantizing them first for online methods (which also gives the
// scale, returned through scale_out). The float weight is released afterwards.
Tensor W8A8LinearMethod::take_codes(LinearLayer& layer, Tensor& scale_out) {
  Parameter& p = layer.param("weight");
  if (scheme_.online == OnlineQuant::None) {
    Tensor codes = p.data().contiguous();
    if (scheme_.weight_type == W8Type::Fp8E4M3) check_fp8_codes(codes, layer.prefix(), "weight");
    return codes;
  }
  QuantizedMatrix q = online_quantize(p.data(), scheme_.online);
  p.set_data(Tensor());  // the float weight is no longer needed
  scale_out = std::move(q.scales);
  return std::move(q.codes);
}

// The kernel's weight scale tensor from the loaded scale parameters (requantizing fused fp8 parts
// to their largest scale when the scheme says so).
Tensor W8A8LinearMethod::weight_scale_of(LinearLayer& layer, Tensor& codes) {
  const std::string& lname = layer.prefix();
  const W8A8Scheme& s = scheme_;
  switch (s.weight_scale) {
    case WeightScaleKind::Tensor: {
      const Tensor slots = layer.param("weight_scale").data().contiguous();
      auto v = slots.span<float>();
      for (size_t i = 0; i < v.size(); ++i)
        check_positive_scale(v[i], lname, "weight_scale", fmt::format("of part {}", i), false);
      if (kernel_.config().weight_scale == WeightScaleKind::Channel) {  // FusedTensorScale::Channelwise
        Tensor out = Tensor::empty({N_p_}, DType::F32);
        float* o = out.data<float>();
        int64_t row = 0;
        for (size_t i = 0; i < parts_.size(); ++i)
          for (int64_t r = 0; r < parts_[i]; ++r) o[row++] = v[i];
        return out;
      }
      const float m = *std::max_element(v.begin(), v.end());
      int64_t row = 0;
      for (size_t i = 0; i < parts_.size(); ++i) {
        if (v[i] != m) requantize_rows(codes, row, parts_[i], v[i], m, s.weight_type);
        row += parts_[i];
      }
      return Tensor::from_vector(std::vector<float>{m}, {1});
    }
    case WeightScaleKind::Channel: {
      Tensor out = layer.param("weight_scale").data().contiguous().view({N_p_}).clone();
      auto v = out.span<float>();
      for (size_t n = 0; n < v.size(); ++n)
        check_positive_scale(v[n], lname, "weight_scale", fmt::format("of output channel {}", n), false);
      return out;
    }
    case WeightScaleKind::Block: {
      const Tensor grid = layer.param(s.block_scale_name).data().contiguous();
      const int64_t gcols = grid.size(1);
      const float* g = grid.data<float>();
      for (int64_t i = 0; i < grid.numel(); ++i)
        check_positive_scale(g[i], lname, s.block_scale_name, fmt::format("at block [{}, {}]", i / gcols, i % gcols),
                             false);
      // Global k of local column 0 and the first grid column this rank uses.
      const int64_t k0 = replicated_block_grid_ && row_parallel_ ? K_p_ * tp_rank_ : 0;
      const int64_t col0 = k0 / s.block_k;
      const int64_t cols = (K_p_ + k0 % s.block_k + s.block_k - 1) / s.block_k;
      Tensor out = Tensor::empty({N_p_, cols}, DType::F32);
      float* o = out.data<float>();
      // Grid row of each local output row.
      int64_t row = 0, off = 0;
      for (size_t i = 0; i < parts_.size(); ++i) {
        for (int64_t r = 0; r < parts_[i]; ++r, ++row) {
          int64_t grow;
          if (replicated_block_grid_) {
            const bool column = layer.spec().kind == LinearKind::Column;
            grow = ((column ? N_p_ * tp_rank_ : 0) + r) / s.block_n;
          } else {
            grow = (off + s.block_n - 1) / s.block_n + r / s.block_n;
          }
          for (int64_t c = 0; c < cols; ++c) o[row * cols + c] = g[grow * gcols + col0 + c];
        }
        off += parts_[i];
      }
      return out;
    }
  }
  return {};
}

void W8A8LinearMethod::static_input(LinearLayer& layer, ScaledMMWeights& w) const {
  const std::string& lname = layer.prefix();
  const Tensor slots = layer.param("input_scale").data().contiguous();
  auto v = slots.span<float>();
  for (size_t i = 0; i < v.size(); ++i)
    check_positive_scale(v[i], lname, "input_scale", fmt::format("of part {}", i), true);
  if (scheme_.act_symmetric) {
    w.input_scale = *std::max_element(v.begin(), v.end());
    return;
  }
  const Tensor zps = layer.param("input_zero_point").data().contiguous();
  auto z = zps.span<int8_t>();
  // One float range covering every part's (scale, zero point), re-expressed as one pair
  // (vLLM CompressedTensorsW8A8Int8 static asymmetric inputs).
  double lo = 0, hi = 0;
  bool equal = true;
  for (size_t i = 0; i < v.size(); ++i) {
    lo = std::min(lo, (-128.0 - z[i]) * v[i]);
    hi = std::max(hi, (127.0 - z[i]) * v[i]);
    equal = equal && v[i] == v[0] && z[i] == z[0];
  }
  if (equal) {
    w.input_scale = v[0];
    w.input_zero_point = z[0];
    return;
  }
  const double scale = (hi - lo) / 255.0;
  w.input_scale = static_cast<float>(scale);
  w.input_zero_point = static_cast<int32_t>(-128.0 - lo / scale);  // truncation, as vLLM's .to(int32)
}

void W8A8LinearMethod::process_weights_after_loading(LinearLayer& layer) {
  ScaledMMWeights w;
  w.K = K_p_;
  w.N = N_p_;
  Tensor online_scale;
  w.codes = take_codes(layer, online_scale);
  if (scheme_.online != OnlineQuant::None) {
    w.weight_scale = online_scale;
  } else {
    w.weight_scale = weight_scale_of(layer, w.codes);
  }
  if (kernel_.config().weight_scale == WeightScaleKind::Block) {
    w.block_k = scheme_.block_k;
    w.k_phase = replicated_block_grid_ && row_parallel_ ? (K_p_ * tp_rank_) % scheme_.block_k : 0;
  }
  if (scheme_.act == ActScheme::StaticTensor && scheme_.online == OnlineQuant::None) static_input(layer, w);
  if (keep_) {
    ScaledMMWeights copy = w;
    copy.codes = w.codes.clone();
    copy.weight_scale = w.weight_scale.clone();
    kept_ = std::move(copy);
  }
  kernel_.prepare(std::move(w));
}

Tensor W8A8LinearMethod::apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) {
  return kernel_.run(layer, x, bias);
}

}  // namespace qlm
