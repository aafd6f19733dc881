#include "quant/fp4_method.h"

#include <cmath>
#include <numeric>

#include "core/float_convert.h"
#include "quant/w8a8_method.h"

namespace qlm {

std::string Fp4Scheme::describe() const {
  return kind == Fp4Kind::Nvfp4 ? fmt::format("nvfp4 e2m1 g{} (e4m3 scales, global scale)", group_size)
                                : fmt::format("mxfp4 e2m1 g{} (e8m0 scales)", group_size);
}

Tensor fp4_packed_to_e4m3(const Tensor& packed) {
  QLM_CHECK(packed.dim() == 2 && packed.dtype() == DType::U8);
  const Tensor src = packed.contiguous();
  const int64_t N = src.size(0), half = src.size(1);
  // One table of the 256 bytes: the two e4m3 codes each byte holds, low nibble first.
  uint16_t pair[256];
  for (int b = 0; b < 256; ++b)
    pair[b] = static_cast<uint16_t>(e2m1_to_e4m3(static_cast<uint8_t>(b & 15)) |
                                    (e2m1_to_e4m3(static_cast<uint8_t>(b >> 4)) << 8));
  Tensor out = Tensor::empty({N, 2 * half}, DType::F8_E4M3);
  const uint8_t* in = src.data<uint8_t>();
  uint8_t* o = out.data<uint8_t>();
  for (int64_t i = 0; i < N * half; ++i) {
    o[2 * i] = static_cast<uint8_t>(pair[in[i]] & 0xFF);
    o[2 * i + 1] = static_cast<uint8_t>(pair[in[i]] >> 8);
  }
  return out;
}

Fp4LinearMethod::Fp4LinearMethod(std::string format, Fp4Scheme scheme) : format_(std::move(format)), scheme_(scheme) {}

std::string Fp4LinearMethod::describe() const {
  std::string s = fmt::format("{} {}", format_, scheme_.describe());
  if (!kernel_.name().empty()) s += fmt::format(" [{}]", kernel_.name());
  return s;
}

void Fp4LinearMethod::create_weights(LinearLayer& layer, int64_t K_p,
                                     const std::vector<int64_t>& output_partition_sizes, int64_t K, int64_t /*N*/,
                                     DType /*params_dtype*/) {
  const int64_t g = scheme_.group_size;
  const std::string& name = layer.prefix();
  if (K % g != 0)
    fail("weights.shape", {.file = {}, .tensor = "weight_scale", .layer = name},
         "the checkpoint does not match config.json (hidden/intermediate sizes)",
         "{} groups {} input columns per scale, but layer {} has K = {} input columns (not a multiple)",
         scheme_.describe(), g, name, K);
  if (K_p % g != 0)
    fail("quant.partition", {.file = {}, .tensor = {}, .layer = name}, "use a smaller tensor-parallel size",
         "{} groups {} input columns per scale, but this rank's in_features K_p = {} (K = {}, tensor-parallel size {}) "
         "is not a multiple of it",
         scheme_.describe(), g, K_p, K, layer.tp().size);
  K_p_ = K_p;
  parts_ = output_partition_sizes;
  N_p_ = std::accumulate(parts_.begin(), parts_.end(), int64_t{0});

  Parameter packed("weight_packed", ParamKind::PackedWeight, {N_p_, K_p / 2}, DType::U8);
  packed.input_dim = 1;
  packed.output_dim = 0;
  packed.packed_dim = 1;
  packed.packed_factor = PackFactor{2, 1};
  layer.add_param(std::move(packed));
  Parameter scale("weight_scale", ParamKind::GroupScale, {N_p_, K_p / g},
                  scheme_.kind == Fp4Kind::Nvfp4 ? DType::F8_E4M3 : DType::U8);
  scale.input_dim = 1;
  scale.output_dim = 0;
  layer.add_param(std::move(scale));
  if (scheme_.kind == Fp4Kind::Nvfp4)
    layer.add_param(
        Parameter("weight_global_scale", ParamKind::PerTensorScale, {static_cast<int64_t>(parts_.size())}, DType::F32));

  ScaledMMConfig cfg;
  cfg.K_p = K_p;
  cfg.N_p = N_p_;
  cfg.weight_type = W8Type::Fp8E4M3;
  cfg.weight_scale = WeightScaleKind::Block;
  cfg.block_n = 1;
  cfg.block_k = g;
  cfg.act = ActScheme::None;
  kernel_.choose(layer, cfg, format_, "fp4 weight-only linear");
}

// F32 [N_p, K_p / group]: each block scale decoded, divided by its part's global scale (NVFP4), validated.
Tensor Fp4LinearMethod::block_multipliers(LinearLayer& layer) const {
  const std::string& lname = layer.prefix();
  const Tensor grid = layer.param("weight_scale").data().contiguous();
  const int64_t cols = grid.size(1);
  const uint8_t* s = grid.data<uint8_t>();
  std::vector<float> global(parts_.size(), 1.0f);
  if (scheme_.kind == Fp4Kind::Nvfp4) {
    const Tensor slots = layer.param("weight_global_scale").data().contiguous();
    auto v = slots.span<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      check_positive_scale(v[i], lname, "weight_global_scale", fmt::format("of part {}", i), false);
      global[i] = v[i];
    }
  }
  auto bad_block = [&](int64_t i, const std::string& why) {
    fail("weights.scale", {.file = {}, .tensor = "weight_scale", .layer = lname},
         "the checkpoint is corrupt (block scales are finite, non-negative multipliers); re-export it",
         "weight_scale at block [{}, {}] (code 0x{:02X}) {}", i / cols, i % cols, s[i], why);
  };
  Tensor out = Tensor::empty({N_p_, cols}, DType::F32);
  float* o = out.data<float>();
  int64_t row = 0;
  for (size_t part = 0; part < parts_.size(); ++part)
    for (int64_t r = 0; r < parts_[part]; ++r, ++row)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = row * cols + c;
        float v;
        if (scheme_.kind == Fp4Kind::Nvfp4) {
          if (e4m3_is_nan(s[i])) bad_block(i, "is NaN");
          v = e4m3_to_f32(s[i]);
          if (std::signbit(v) && v != 0) bad_block(i, fmt::format("is negative ({})", v));
          v /= global[part];
        } else {
          if (e8m0_is_nan(s[i])) bad_block(i, "is NaN (e8m0 0xFF)");
          // 6 * 2^127 overflows float32: no MX encoder writes such a scale.
          if (s[i] >= 254)
            bad_block(i, fmt::format("is 2^{}, which overflows float32 with e2m1 codes up to 6", s[i] - 127));
          v = e8m0_to_f32(s[i]);
        }
        o[i] = v;
      }
  return out;
}

void Fp4LinearMethod::process_weights_after_loading(LinearLayer& layer) {
  ScaledMMWeights w;
  w.K = K_p_;
  w.N = N_p_;
  w.codes = fp4_packed_to_e4m3(layer.param("weight_packed").data());
  w.weight_scale = block_multipliers(layer);
  w.block_k = scheme_.group_size;
  w.k_phase = 0;
  kernel_.prepare(std::move(w));
}

Tensor Fp4LinearMethod::apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) {
  return kernel_.run(layer, x, bias);
}

}  // namespace qlm
