// Test-side FP8 / INT8 quantizers and references for the W8A8 layer tests, written independently of
// the library's quantizers (only the exact float8 conversions of core/float_convert.h are shared).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/float_convert.h"
#include "core/tensor.h"
#include "layers/linear.h"
#include "support/quantize_ref.h"

namespace qlm::testing {

// Layer 0's gate|up merged column-parallel projection (no bias) and its row-parallel down projection.
inline LinearSpec gate_up_spec(int64_t K, int64_t gate, int64_t up) {
  LinearSpec s;
  s.kind = LinearKind::MergedColumn;
  s.prefix = "model.layers.0.mlp.gate_up_proj";
  s.input_size = K;
  s.output_sizes = {gate, up};
  s.output_size = gate + up;
  s.shard_prefixes = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"};
  return s;
}
inline LinearSpec down_spec(int64_t K, int64_t N) {
  LinearSpec s;
  s.kind = LinearKind::Row;
  s.prefix = "model.layers.0.mlp.down_proj";
  s.input_size = K;
  s.output_size = N;
  return s;
}

// One quantized part [N, K] (nn.Linear layout): checkpoint tensors and the dequantized weight.
struct W8Part {
  CheckpointTensors tensors;  // "weight", "weight_scale" / "weight_scale_inv", "input_scale", ...
  std::vector<double> deq;    // [N, K]
  int64_t N = 0, K = 0;
};

inline std::vector<float> random_nk(int64_t N, int64_t K, uint64_t seed, float spread = 1.0f) {
  std::vector<float> w = random_weights(N, K, seed);  // [N*K] values, used as [N, K]
  for (auto& v : w) v *= spread;
  return w;
}

// fp8 per-tensor: s = absmax / 448 (times `scale_factor` to give parts different scales).
inline W8Part fp8_tensor_part(const std::vector<float>& w, int64_t N, int64_t K, float scale_factor = 1.0f,
                              bool zero_dim_scale = true) {
  W8Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K)), .N = N, .K = K};
  float am = 0;
  for (float v : w) am = std::max(am, std::fabs(v));
  const float s = am / 448.0f * scale_factor;
  Tensor codes = Tensor::empty({N, K}, DType::F8_E4M3);
  for (int64_t i = 0; i < N * K; ++i) {
    codes.data<uint8_t>()[i] = f32_to_e4m3(w[i] / s);
    p.deq[i] = double(e4m3_to_f32(codes.data<uint8_t>()[i])) * s;
  }
  p.tensors["weight"] = codes;
  p.tensors["weight_scale"] = Tensor::from_vector(std::vector<float>{s}, zero_dim_scale ? Shape{} : Shape{1});
  return p;
}

// fp8 block: one scale per [bn, bk] block (ceil-divided grid), stored as `scale_name`.
inline W8Part fp8_block_part(const std::vector<float>& w, int64_t N, int64_t K, int64_t bn, int64_t bk,
                             const std::string& scale_name = "weight_scale_inv") {
  W8Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K)), .N = N, .K = K};
  const int64_t R = (N + bn - 1) / bn, C = (K + bk - 1) / bk;
  std::vector<float> s(static_cast<size_t>(R * C), 0.f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      float& v = s[(n / bn) * C + k / bk];
      v = std::max(v, std::fabs(w[n * K + k]));
    }
  for (auto& v : s) v = std::max(v, 1e-6f) / 448.0f;
  Tensor codes = Tensor::empty({N, K}, DType::F8_E4M3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const float sc = s[(n / bn) * C + k / bk];
      const uint8_t c = f32_to_e4m3(w[n * K + k] / sc);
      codes.data<uint8_t>()[n * K + k] = c;
      p.deq[n * K + k] = double(e4m3_to_f32(c)) * sc;
    }
  p.tensors["weight"] = codes;
  p.tensors[scale_name] = Tensor::from_vector(s, {R, C});
  return p;
}

// Per output channel, fp8 or int8, scale [N, 1].
inline W8Part channel_part(const std::vector<float>& w, int64_t N, int64_t K, bool int8) {
  W8Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K)), .N = N, .K = K};
  Tensor codes = Tensor::empty({N, K}, int8 ? DType::I8 : DType::F8_E4M3);
  std::vector<float> s(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    float am = 0;
    for (int64_t k = 0; k < K; ++k) am = std::max(am, std::fabs(w[n * K + k]));
    s[n] = am / (int8 ? 127.0f : 448.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float v = w[n * K + k] / s[n];
      if (int8) {
        const auto c = static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
        codes.data<int8_t>()[n * K + k] = c;
        p.deq[n * K + k] = double(c) * s[n];
      } else {
        const uint8_t c = f32_to_e4m3(v);
        codes.data<uint8_t>()[n * K + k] = c;
        p.deq[n * K + k] = double(e4m3_to_f32(c)) * s[n];
      }
    }
  }
  p.tensors["weight"] = codes;
  p.tensors["weight_scale"] = Tensor::from_vector(s, {N, 1});
  return p;
}

// Int8 per-tensor: s = absmax / 127 * factor.
inline W8Part int8_tensor_part(const std::vector<float>& w, int64_t N, int64_t K, float scale_factor = 1.0f) {
  W8Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K)), .N = N, .K = K};
  float am = 0;
  for (float v : w) am = std::max(am, std::fabs(v));
  const float s = am / 127.0f * scale_factor;
  Tensor codes = Tensor::empty({N, K}, DType::I8);
  for (int64_t i = 0; i < N * K; ++i) {
    const auto c = static_cast<int8_t>(std::clamp(std::nearbyint(w[i] / s), -128.0f, 127.0f));
    codes.data<int8_t>()[i] = c;
    p.deq[i] = double(c) * s;
  }
  p.tensors["weight"] = codes;
  p.tensors["weight_scale"] = Tensor::from_vector(std::vector<float>{s}, {1});
  return p;
}

// Activation fake-quantization of the reference (FORMATS.md §6 formulas, in double where possible).
enum class RefAct { None, Fp8Token, Fp8Static, Fp8Group, Int8Token, Int8TokenAsym, Int8Static };

inline std::vector<double> ref_acts(const std::vector<float>& x, int64_t M, int64_t K, RefAct a, float static_scale = 0,
                                    int static_zp = 0, int64_t group = 0) {
  std::vector<double> out(x.size());
  for (int64_t m = 0; m < M; ++m) {
    const float* r = x.data() + m * K;
    auto fp8 = [&](int64_t k0, int64_t k1, float s) {
      for (int64_t k = k0; k < k1; ++k) out[m * K + k] = double(e4m3_to_f32(f32_to_e4m3(r[k] * (1.0f / s)))) * s;
    };
    float am = 0, lo = 0, hi = 0;
    for (int64_t k = 0; k < K; ++k) {
      am = std::max(am, std::fabs(r[k]));
      lo = std::min(lo, r[k]);
      hi = std::max(hi, r[k]);
    }
    switch (a) {
      case RefAct::None:
        for (int64_t k = 0; k < K; ++k) out[m * K + k] = r[k];
        break;
      case RefAct::Fp8Token: fp8(0, K, std::max(am / 448.0f, 1.0f / (448.0f * 512.0f))); break;
      case RefAct::Fp8Static: fp8(0, K, static_scale); break;
      case RefAct::Fp8Group:
        for (int64_t k0 = 0; k0 < K; k0 += group) {
          const int64_t k1 = std::min(K, k0 + group);
          float g = 0;
          for (int64_t k = k0; k < k1; ++k) g = std::max(g, std::fabs(r[k]));
          fp8(k0, k1, std::max(g, 1e-10f) / 448.0f);
        }
        break;
      case RefAct::Int8Token:
        for (int64_t k = 0; k < K; ++k)
          out[m * K + k] = std::clamp(std::nearbyint(r[k] * (127.0f / am)), -128.0f, 127.0f) * double(am / 127.0f);
        break;
      case RefAct::Int8TokenAsym: {
        const float s = (hi - lo) / 255.0f;
        const float zp = std::nearbyint(-128.0f - lo / s);
        for (int64_t k = 0; k < K; ++k)
          out[m * K + k] = (std::clamp(std::nearbyint(r[k] * (1.0f / s)) + zp, -128.0f, 127.0f) - zp) * double(s);
        break;
      }
      case RefAct::Int8Static:
        for (int64_t k = 0; k < K; ++k)
          out[m * K + k] =
              (std::clamp(std::nearbyint(r[k] * (1.0f / static_scale)) + static_zp, -128.0f, 127.0f) - static_zp) *
              double(static_scale);
        break;
    }
  }
  return out;
}

// y[M, N] = xd[M, K] · Wᵀ (+ bias), W the concatenation of the parts' dequantized weights.
inline std::vector<double> ref_output(const std::vector<double>& xd, int64_t M, int64_t K,
                                      const std::vector<const std::vector<double>*>& parts,
                                      const std::vector<int64_t>& rows, const std::vector<float>* bias = nullptr) {
  int64_t N = 0;
  for (int64_t r : rows) N += r;
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    int64_t n0 = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      for (int64_t n = 0; n < rows[p]; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += xd[m * K + k] * (*parts[p])[n * K + k];
        y[m * N + n0 + n] = acc + (bias ? (*bias)[n0 + n] : 0.0);
      }
      n0 += rows[p];
    }
  }
  return y;
}

inline double rel_mean_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::fabs(a[i] - b[i]);
    den += std::fabs(b[i]);
  }
  return num / std::max(den, 1e-30);
}

inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(b[i])));
  }
  return num / std::max(den, 1e-30);
}

}  // namespace qlm::testing
