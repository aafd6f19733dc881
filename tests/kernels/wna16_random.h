// Test-side generator of random WNA16 standard-form weights, with its own sequential bit packer and
// a float64 dequantizer that reads the codes, not the packed words (independent of the kernels).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quant/wna16_weights.h"

namespace qlm::testing {

struct Wna16Spec {
  int bits = 4;
  int64_t K = 0, N = 0;
  int64_t group_size = -1;  // -1: one group over K
  bool zero_points = false;
  bool act_order = false;  // g_idx: a random permutation in which every group occurs group_size times
  uint64_t seed = 1;
};

struct RandomWna16 {
  WNA16Weights weights;
  std::vector<double> dequant;  // [K, N] float64 reference weight from the codes
};

// Packs codes [K, N] along K into GPTQ layout: column n is one little-endian bit stream.
inline Tensor pack_codes_sequential(const std::vector<uint32_t>& codes, int64_t K, int64_t N, int bits) {
  const int64_t words = (K * bits + 31) / 32;
  std::vector<uint32_t> packed(static_cast<size_t>(words * N), 0u);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const uint64_t bit = static_cast<uint64_t>(k) * bits;
      const uint64_t field = static_cast<uint64_t>(codes[k * N + n]) << (bit % 32);
      packed[(bit / 32) * N + n] |= static_cast<uint32_t>(field);
      if ((bit % 32) + bits > 32) packed[(bit / 32 + 1) * N + n] |= static_cast<uint32_t>(field >> 32);
    }
  std::vector<int32_t> as_i32(packed.begin(), packed.end());
  return Tensor::from_vector(as_i32, {words, N});
}

inline RandomWna16 random_wna16(const Wna16Spec& spec) {
  std::mt19937_64 rng(spec.seed);
  const int64_t K = spec.K, N = spec.N;
  const int64_t gs = spec.group_size < 0 ? K : spec.group_size;
  const int64_t G = (K + gs - 1) / gs;
  const uint32_t max_code = (1u << spec.bits) - 1u;
  std::uniform_int_distribution<uint32_t> code_dist(0, max_code);
  std::uniform_real_distribution<float> scale_dist(0.5f, 2.0f);

  std::vector<uint32_t> codes(static_cast<size_t>(K * N));
  for (auto& c : codes) c = code_dist(rng);
  std::vector<float> scales(static_cast<size_t>(G * N));
  for (auto& s : scales) s = scale_dist(rng) * 0.01f;
  std::vector<int32_t> zeros(static_cast<size_t>(G * N), 0);
  for (auto& z : zeros) z = static_cast<int32_t>(code_dist(rng));
  std::vector<int32_t> g_idx(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<int32_t>(k / gs);
  if (spec.act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);

  RandomWna16 out;
  WNA16Weights& w = out.weights;
  const int bias = 1 << (spec.bits - 1);
  w.weight_type = PackedIntType{spec.bits, spec.zero_points ? 0 : bias};
  w.K = K;
  w.N = N;
  w.group_size = gs;
  w.qweight = pack_codes_sequential(codes, K, N, spec.bits);
  w.scales = Tensor::from_vector(scales, {G, N});
  if (spec.zero_points) w.zeros = Tensor::from_vector(zeros, {G, N});
  if (spec.act_order) w.g_idx = Tensor::from_vector(g_idx, {K});

  out.dequant.resize(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t g = g_idx[k];
      const double zero = spec.zero_points ? zeros[g * N + n] : bias;
      out.dequant[k * N + n] = (static_cast<double>(codes[k * N + n]) - zero) * scales[g * N + n];
    }
  return out;
}

inline std::vector<float> random_floats(size_t count, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (auto& f : v) f = dist(rng);
  return v;
}

// y[M, N] = x[M, K] · W[K, N] (+ bias) in float64.
inline std::vector<double> matmul_f64(const std::vector<float>& x, const std::vector<double>& w, const float* bias,
                                      int64_t M, int64_t K, int64_t N) {
  std::vector<double> y(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) {
      const double xv = x[m * K + k];
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += xv * w[k * N + n];
    }
    if (bias)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias[n];
  }
  return y;
}

// ||got - want||_2 / ||want||_2.
inline double normwise_error(const float* got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

// Index of the first non-finite element, or -1.
inline int64_t first_non_finite(const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(y[i])) return i;
  return -1;
}

// One point of the parameterised WNA16 test grids: bit width, group size (-1: one group over K; 0: an odd group size
// the test derives from K), zero points, act-order.
struct Wna16GridParam {
  int bits;
  int64_t group;
  bool zp;
  bool act;
};

// Every combination of `bits` and `groups` with and without zero points and act-order, except act-order with one
// group over K (its g_idx can only be all zeros).
inline std::vector<Wna16GridParam> wna16_grid(std::initializer_list<int> bits, std::initializer_list<int64_t> groups) {
  std::vector<Wna16GridParam> out;
  for (int b : bits)
    for (int64_t group : groups)
      for (bool zp : {false, true})
        for (bool act : {false, true})
          if (!(act && group == -1)) out.push_back({b, group, zp, act});
  return out;
}

// The test name of a grid point: b4_g128_zp_act, b8_gch_sym_seq (one group over K), b4_godd_sym_seq (group 0).
inline std::string wna16_grid_name(const Wna16GridParam& p) {
  const std::string group = p.group < 0 ? "ch" : p.group == 0 ? "odd" : std::to_string(p.group);
  return "b" + std::to_string(p.bits) + "_g" + group + "_" + (p.zp ? "zp" : "sym") + "_" + (p.act ? "act" : "seq");
}

}  // namespace qlm::testing
