#include "runtime/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace qlm::ops {

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::Default: return "default";
    case RopeType::Linear: return "linear";
    case RopeType::Dynamic: return "dynamic";
    case RopeType::Llama3: return "llama3";
  }
  return "?";
}

namespace {

std::vector<double> default_inv_freq(double base, int64_t dim) {
  std::vector<double> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    inv[static_cast<size_t>(i)] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  return inv;
}

// Llama 3.1: wavelengths below high_freq_wavelen keep their frequency, above low_freq_wavelen are
// divided by factor, and in between are interpolated by the smooth factor.
void llama3_scale(const RopeParams& p, std::vector<double>& inv) {
  const double old_len = static_cast<double>(p.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / p.low_freq_factor;
  const double high_freq_wavelen = old_len / p.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    const double scaled = wavelen > low_freq_wavelen ? f / p.factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const double smooth = (old_len / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      f = (1 - smooth) * scaled / p.factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

}  // namespace

std::vector<double> rope_inv_freq(const RopeParams& p, int64_t seq_len) {
  QLM_CHECK(p.rotary_dim > 0 && p.rotary_dim % 2 == 0);
  const int64_t dim = p.rotary_dim;
  switch (p.type) {
    case RopeType::Default: return default_inv_freq(p.theta, dim);
    case RopeType::Linear: {
      std::vector<double> inv = default_inv_freq(p.theta, dim);
      for (double& f : inv) f /= p.factor;
      return inv;
    }
    case RopeType::Dynamic: {
      const double mpe = static_cast<double>(p.max_position_embeddings);
      const double len = std::max(static_cast<double>(seq_len), mpe);
      const double base = p.theta * std::pow(p.factor * len / mpe - (p.factor - 1),
                                             static_cast<double>(dim) / static_cast<double>(dim - 2));
      return default_inv_freq(base, dim);
    }
    case RopeType::Llama3: {
      std::vector<double> inv = default_inv_freq(p.theta, dim);
      llama3_scale(p, inv);
      return inv;
    }
  }
  return {};
}

RopeAngles rope_angles(const RopeParams& params, std::span<const int64_t> positions) {
  int64_t max_pos = 0;
  for (int64_t pos : positions) max_pos = std::max(max_pos, pos);
  // transformers keeps inv_freq in float32; the angle is computed from that value.
  std::vector<double> inv = rope_inv_freq(params, max_pos + 1);
  RopeAngles a;
  a.half = static_cast<int64_t>(inv.size());
  a.cos.resize(positions.size() * inv.size());
  a.sin.resize(positions.size() * inv.size());
  for (size_t t = 0; t < positions.size(); ++t)
    for (size_t i = 0; i < inv.size(); ++i) {
      const double angle = static_cast<double>(static_cast<float>(inv[i])) * static_cast<double>(positions[t]);
      a.cos[t * inv.size() + i] = static_cast<float>(std::cos(angle));
      a.sin[t * inv.size() + i] = static_cast<float>(std::sin(angle));
    }
  return a;
}

RopeTable rope_table(const RopeParams& params, int64_t positions) {
  QLM_CHECK(positions > 0);
  // Positions that share one set of frequencies (all, but past max_position_embeddings with dynamic scaling) are
  // computed together.
  const int64_t shared = std::max<int64_t>(
      1, params.type == RopeType::Dynamic ? std::min(positions, params.max_position_embeddings) : positions);
  std::vector<int64_t> pos(static_cast<size_t>(shared));
  for (size_t p = 0; p < pos.size(); ++p) pos[p] = static_cast<int64_t>(p);
  const RopeAngles first = rope_angles(params, pos);
  RopeTable t;
  t.half = first.half;
  const int64_t half = t.half;
  t.rows.resize(static_cast<size_t>(positions * 2 * half));
  const auto put = [&](int64_t p, const RopeAngles& a, int64_t r) {
    std::copy_n(a.cos.begin() + r * half, half, t.rows.begin() + p * 2 * half);
    std::copy_n(a.sin.begin() + r * half, half, t.rows.begin() + p * 2 * half + half);
  };
  for (int64_t p = 0; p < std::min(positions, shared); ++p) put(p, first, p);
  for (int64_t p = shared; p < positions; ++p) put(p, rope_angles(params, std::span<const int64_t>(&p, 1)), 0);
  return t;
}

void apply_rope(const RopeAngles& angles, float* x, int64_t tokens, int64_t row_stride, int64_t heads,
                int64_t head_dim) {
  const int64_t half = angles.half;
  QLM_CHECK(2 * half <= head_dim);
  QLM_CHECK(static_cast<int64_t>(angles.cos.size()) == tokens * half);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = angles.cos.data() + t * half;
    const float* s = angles.sin.data() + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c[i] - x2 * s[i];
        v[i + half] = x2 * c[i] + x1 * s[i];
      }
    }
  }
}

}  // namespace qlm::ops
