#include "quant/online/online_quantize.h"

#include <algorithm>
#include <cmath>

#include "core/float_convert.h"
#include "quant/w8a8_method.h"

namespace qlm {
namespace {

uint8_t fp8_code(float v, float inv) { return f32_to_e4m3(std::clamp(v * inv, -kE4M3Max, kE4M3Max)); }

int8_t int8_code(float v, float scale) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(v / scale), -127.0f, 127.0f));
}

}  // namespace

float absmax_of(const Tensor& w) {
  const Tensor f = w.to(DType::F32);
  float m = 0;
  for (float v : f.span<float>()) m = std::max(m, std::fabs(v));
  return m;
}

float fp8_tensor_scale(float absmax) { return absmax > 0 ? absmax / kE4M3Max : 1.0f; }

Tensor fp8_quantize_with_scale(const Tensor& w, float scale) {
  const Tensor f = w.to(DType::F32);
  Tensor codes = Tensor::empty(f.shape(), DType::F8_E4M3);
  auto in = f.span<float>();
  auto out = codes.span<uint8_t>();
  const float inv = 1.0f / scale;
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp8_code(in[i], inv);
  return codes;
}

QuantizedMatrix online_quantize(const Tensor& w, OnlineQuant how) {
  QLM_CHECK(w.dim() == 2);
  const Tensor f = w.to(DType::F32);
  const int64_t N = f.size(0), K = f.size(1);
  const float* in = f.data<float>();
  QuantizedMatrix q;
  switch (how) {
    case OnlineQuant::Fp8PerTensor: {
      const float s = fp8_tensor_scale(absmax_of(f));
      q.codes = fp8_quantize_with_scale(f, s);
      q.scales = Tensor::from_vector(std::vector<float>{s}, {1});
      return q;
    }
    case OnlineQuant::Fp8PerChannel:
    case OnlineQuant::Int8PerChannel: {
      const bool fp8 = how == OnlineQuant::Fp8PerChannel;
      q.codes = Tensor::empty({N, K}, fp8 ? DType::F8_E4M3 : DType::I8);
      q.scales = Tensor::empty({N}, DType::F32);
      float* s = q.scales.data<float>();
      for (int64_t n = 0; n < N; ++n) {
        const float* row = in + n * K;
        float m = 0;
        for (int64_t k = 0; k < K; ++k) m = std::max(m, std::fabs(row[k]));
        if (fp8) {
          s[n] = fp8_tensor_scale(m);
          const float inv = 1.0f / s[n];
          uint8_t* out = q.codes.data<uint8_t>() + n * K;
          for (int64_t k = 0; k < K; ++k) out[k] = fp8_code(row[k], inv);
        } else {
          s[n] = m > 0 ? m / 127.0f : 1.0f;
          int8_t* out = q.codes.data<int8_t>() + n * K;
          for (int64_t k = 0; k < K; ++k) out[k] = int8_code(row[k], s[n]);
        }
      }
      return q;
    }
    case OnlineQuant::None: break;
  }
  QLM_CHECK(false && "not an online quantization");
  return q;
}

void requantize_rows(Tensor& codes, int64_t row0, int64_t rows, float from, float to, W8Type type) {
  const int64_t K = codes.size(1);
  const float inv = 1.0f / to;
  switch (type) {
    case W8Type::Fp8E4M3: {
      uint8_t* c = codes.data<uint8_t>() + row0 * K;
      for (int64_t i = 0; i < rows * K; ++i) c[i] = fp8_code(e4m3_to_f32(c[i]) * from, inv);
      return;
    }
    case W8Type::Int8: {
      int8_t* c = codes.data<int8_t>() + row0 * K;
      for (int64_t i = 0; i < rows * K; ++i)
        c[i] = static_cast<int8_t>(std::clamp(std::nearbyint(static_cast<float>(c[i]) * from * inv), -128.0f, 127.0f));
      return;
    }
  }
}

}  // namespace qlm
