#include "kernels/cpu/random_weights.h"

#include <algorithm>
#include <random>
#include <vector>

namespace qlm {

WNA16Weights random_wna16_weights(const RandomWna16Options& o) {
  std::mt19937_64 rng(o.seed);
  const int64_t gs = o.group_size < 0 ? o.K : o.group_size;
  const int64_t groups = (o.K + gs - 1) / gs;
  WNA16Weights w;
  w.weight_type = PackedIntType{o.bits, o.zero_points ? 0 : 1 << (o.bits - 1)};
  w.K = o.K;
  w.N = o.N;
  w.group_size = gs;
  w.qweight = Tensor::empty({(o.K * o.bits + 31) / 32, o.N}, DType::I32);
  for (int32_t& word : w.qweight.span<int32_t>()) word = static_cast<int32_t>(rng());
  w.scales = Tensor::empty({groups, o.N}, DType::F32);
  std::uniform_real_distribution<float> scale(0.005f, 0.02f);
  for (float& s : w.scales.span<float>()) s = scale(rng);
  if (o.zero_points) {
    w.zeros = Tensor::empty({groups, o.N}, DType::I32);
    for (int32_t& z : w.zeros.span<int32_t>()) z = static_cast<int32_t>(rng() & w.weight_type.mask());
  }
  if (o.act_order) {
    std::vector<int32_t> g_idx(static_cast<size_t>(o.K));
    for (int64_t k = 0; k < o.K; ++k) g_idx[k] = static_cast<int32_t>(k / gs);
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    w.g_idx = Tensor::from_vector(g_idx, {o.K});
  }
  return w;
}

Tensor random_float_tensor(int64_t rows, int64_t cols, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::empty({rows, cols}, DType::F32);
  for (float& f : t.span<float>()) f = dist(rng);
  return dtype == DType::F32 ? t : t.to(dtype);
}

}  // namespace qlm
