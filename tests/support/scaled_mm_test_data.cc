#include "support/scaled_mm_test_data.h"

#include <cmath>
#include <random>

#include "core/float_convert.h"

namespace qlm::testing {

ScaledMMWeights random_scaled_mm_weights(const ScaledMMWeightSpec& s, int64_t N, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  ScaledMMWeights w;
  w.K = K;
  w.N = N;
  w.codes = Tensor::empty({N, K}, s.type == W8Type::Int8 ? DType::I8 : DType::F8_E4M3);
  for (int64_t i = 0; i < N * K; ++i)
    w.codes.data<uint8_t>()[i] =
        s.type == W8Type::Int8 ? static_cast<uint8_t>(rng() & 0xff) : f32_to_e4m3(u(rng) * 300.f);
  std::vector<float> scales;
  if (s.ws == WeightScaleKind::Tensor) scales = {0.0123f};
  if (s.ws == WeightScaleKind::Channel) scales.resize(static_cast<size_t>(N));
  const int64_t cols = (K + s.phase + s.block - 1) / s.block;
  if (s.ws == WeightScaleKind::Block) scales.resize(static_cast<size_t>(N * cols));
  if (s.ws != WeightScaleKind::Tensor)
    for (auto& x : scales) x = 0.001f + 0.01f * std::fabs(u(rng));
  w.weight_scale = s.ws == WeightScaleKind::Block ? Tensor::from_vector(scales, {N, cols})
                                                  : Tensor::from_vector(scales, {static_cast<int64_t>(scales.size())});
  if (s.ws == WeightScaleKind::Block) {
    w.block_k = s.block;
    w.k_phase = s.phase;
  }
  w.input_scale = 0.03125f;
  w.input_zero_point = s.sym ? 0 : 7;
  return w;
}

ScaledMMWeights clone_weights(const ScaledMMWeights& w) {
  ScaledMMWeights c = w;
  c.codes = w.codes.clone();
  c.weight_scale = w.weight_scale.clone();
  return c;
}

std::vector<float> scaled_mm_test_acts(int64_t M, int64_t K, DType act, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = u(rng);
  if (M > 2)
    for (int64_t k = 0; k < K; ++k) {
      x[static_cast<size_t>(K + k)] = 0.0f;
      x[static_cast<size_t>(2 * K + k)] *= 1e-6f;
    }
  return Tensor::from_vector(x, {M, K}).to(act).to_float_vector();
}

}  // namespace qlm::testing
