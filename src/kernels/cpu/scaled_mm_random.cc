#include "kernels/cpu/scaled_mm_random.h"

#include <random>
#include <vector>

#include "core/float_convert.h"

namespace qlm {

ScaledMMConfig bench_scaled_mm_config(const std::string& format, int64_t K, int64_t N) {
  ScaledMMConfig c;
  c.K_p = K;
  c.N_p = N;
  c.weight_type = format == "int8" ? W8Type::Int8 : W8Type::Fp8E4M3;
  c.weight_scale = format == "int8" ? WeightScaleKind::Channel : WeightScaleKind::Tensor;
  c.act = ActScheme::DynamicToken;
  c.device = Device::cpu();
  return c;
}

ScaledMMWeights random_scaled_mm_weights(const ScaledMMConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  ScaledMMWeights w;
  w.K = c.K_p;
  w.N = c.N_p;
  const bool int8 = c.weight_type == W8Type::Int8;
  w.codes = Tensor::empty({w.N, w.K}, int8 ? DType::I8 : DType::F8_E4M3);
  uint8_t* p = w.codes.data<uint8_t>();
  for (int64_t i = 0; i < w.N * w.K; ++i)
    p[i] = int8 ? static_cast<uint8_t>(rng() & 0xff) : f32_to_e4m3(u(rng) * 400.f);
  const int64_t scales = c.weight_scale == WeightScaleKind::Channel ? w.N : 1;
  std::vector<float> s(static_cast<size_t>(scales));
  for (auto& v : s) v = 0.001f + 0.001f * std::abs(u(rng));
  w.weight_scale = Tensor::from_vector(s, {scales});
  w.input_scale = 0.01f;
  return w;
}

}  // namespace qlm
