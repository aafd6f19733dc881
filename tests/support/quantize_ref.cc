#include "support/quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/float_convert.h"
#include "io/json.h"
#include "parallel/communicator.h"
#include "quant/packing.h"

namespace qlm::testing {
namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double uniform01(uint64_t& s) { return static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53; }

float round_to(float v, DType dtype) {
  if (dtype == DType::F16) return f16_to_f32(f32_to_f16(v));
  if (dtype == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  QLM_CHECK(dtype == DType::F32);
  return v;
}

// Row groups: g_idx[k] for plain grouping or for a random act-order permutation.
std::vector<int32_t> make_g_idx(int64_t K, int64_t G, std::optional<uint64_t> seed) {
  std::vector<int64_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  if (seed) {
    uint64_t s = *seed;
    for (int64_t i = K - 1; i > 0; --i) std::swap(order[i], order[splitmix(s) % static_cast<uint64_t>(i + 1)]);
  }
  std::vector<int32_t> g(static_cast<size_t>(K));
  for (int64_t pos = 0; pos < K; ++pos) g[order[pos]] = static_cast<int32_t>(pos / G);
  return g;
}

IntQuant start(int64_t K, int64_t N, int bits, int64_t group_size, bool sym, std::optional<uint64_t> seed,
               DType scale_dtype) {
  IntQuant q;
  q.bits = bits;
  q.K = K;
  q.N = N;
  q.group_size = group_size < 0 ? K : group_size;
  QLM_CHECK(K % q.group_size == 0);
  q.num_groups = K / q.group_size;
  q.symmetric = sym;
  q.act_order = seed.has_value();
  q.g_idx = make_g_idx(K, q.group_size, seed);
  q.codes.assign(static_cast<size_t>(K * N), 0);
  q.zeros.assign(static_cast<size_t>(q.num_groups * N), 0);
  q.scales.assign(static_cast<size_t>(q.num_groups * N), 0.f);
  q.scale_dtype = scale_dtype;
  return q;
}

// Per (group, column) min and max of the weights.
void group_min_max(const std::vector<float>& w, const IntQuant& q, std::vector<float>& mn, std::vector<float>& mx) {
  mn.assign(q.scales.size(), std::numeric_limits<float>::infinity());
  mx.assign(q.scales.size(), -std::numeric_limits<float>::infinity());
  for (int64_t k = 0; k < q.K; ++k)
    for (int64_t n = 0; n < q.N; ++n) {
      size_t gi = static_cast<size_t>(q.g_idx[k] * q.N + n);
      mn[gi] = std::min(mn[gi], w[k * q.N + n]);
      mx[gi] = std::max(mx[gi], w[k * q.N + n]);
    }
}

// q = clamp(round(w / s) + z, 0, maxq) with the stored scale.
void assign_codes(const std::vector<float>& w, IntQuant& q) {
  const int maxq = (1 << q.bits) - 1;
  for (int64_t k = 0; k < q.K; ++k)
    for (int64_t n = 0; n < q.N; ++n) {
      size_t gi = static_cast<size_t>(q.g_idx[k] * q.N + n);
      double v = std::nearbyint(w[k * q.N + n] / q.scales[gi]) + q.zeros[gi];
      q.codes[k * q.N + n] = static_cast<uint8_t>(std::clamp(v, 0.0, static_cast<double>(maxq)));
    }
}

Tensor scales_tensor(const std::vector<float>& values, Shape shape, DType dtype) {
  return Tensor::from_vector(values, std::move(shape)).to(dtype);
}

std::vector<uint8_t> transpose_codes(const std::vector<uint8_t>& a, int64_t rows, int64_t cols) {
  std::vector<uint8_t> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

}  // namespace

std::vector<float> random_weights(int64_t K, int64_t N, uint64_t seed) {
  std::vector<float> w(static_cast<size_t>(K * N));
  for (auto& v : w) {
    double u1 = std::max(uniform01(seed), 1e-300), u2 = uniform01(seed);
    v = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
  return w;
}

std::vector<float> random_inputs(int64_t M, int64_t K, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = static_cast<float>(2.0 * uniform01(seed) - 1.0);
  return x;
}

IntQuant quantize_gptq(const std::vector<float>& w, int64_t K, int64_t N, const QuantOptions& opt) {
  IntQuant q = start(K, N, opt.bits, opt.group_size, opt.symmetric, opt.act_order_seed, opt.scale_dtype);
  std::vector<float> mn, mx;
  group_min_max(w, q, mn, mx);
  const int maxq = (1 << q.bits) - 1;
  for (size_t i = 0; i < q.scales.size(); ++i) {
    float xmin = std::min(mn[i], 0.f), xmax = std::max(mx[i], 0.f);
    if (opt.symmetric) {
      xmax = std::max(std::fabs(xmin), xmax);
      if (xmin < 0) xmin = -xmax;
    }
    if (xmin == 0 && xmax == 0) xmin = -1, xmax = 1;
    q.scales[i] = round_to((xmax - xmin) / maxq, opt.scale_dtype);
    q.zeros[i] = opt.symmetric ? (maxq + 1) / 2
                               : static_cast<int32_t>(std::clamp(std::nearbyint(-static_cast<double>(xmin) / q.scales[i]), 1.0 * opt.min_zero, 1.0 * maxq));
  }
  assign_codes(w, q);
  return q;
}

IntQuant quantize_awq(const std::vector<float>& w, int64_t K, int64_t N, int64_t group_size, DType scale_dtype) {
  IntQuant q = start(K, N, 4, group_size, /*sym=*/false, std::nullopt, scale_dtype);
  std::vector<float> mn, mx;
  group_min_max(w, q, mn, mx);
  for (size_t i = 0; i < q.scales.size(); ++i) {
    q.scales[i] = round_to(std::max(mx[i] - mn[i], 1e-5f) / 15.f, scale_dtype);
    q.zeros[i] = static_cast<int32_t>(std::clamp(-std::nearbyint(static_cast<double>(mn[i]) / q.scales[i]), 0.0, 15.0));
  }
  assign_codes(w, q);
  return q;
}

IntQuant quantize_ct(const std::vector<float>& w, int64_t K, int64_t N, const QuantOptions& opt) {
  IntQuant q = start(K, N, opt.bits, opt.group_size, opt.symmetric, opt.act_order_seed, opt.scale_dtype);
  std::vector<float> mn, mx;
  group_min_max(w, q, mn, mx);
  const int qmax = (1 << (q.bits - 1)) - 1, qmin = -(1 << (q.bits - 1)), offset = 1 << (q.bits - 1);
  const float eps = std::numeric_limits<float>::epsilon();
  for (size_t i = 0; i < q.scales.size(); ++i) {
    float lo = std::min(mn[i], 0.f), hi = std::max(mx[i], 0.f);
    if (opt.symmetric) {
      q.scales[i] = round_to(std::max(std::max(std::fabs(lo), hi) / ((qmax - qmin) / 2.f), eps), opt.scale_dtype);
      q.zeros[i] = offset;
    } else {
      q.scales[i] = round_to(std::max((hi - lo) / static_cast<float>(qmax - qmin), eps), opt.scale_dtype);
      double z = std::clamp(std::nearbyint(qmin - static_cast<double>(lo) / q.scales[i]), 1.0 * qmin, 1.0 * qmax);
      q.zeros[i] = static_cast<int32_t>(z) + offset;  // stored unsigned
    }
  }
  assign_codes(w, q);
  return q;
}

std::vector<double> dequantize(const IntQuant& q) {
  std::vector<double> w(static_cast<size_t>(q.K * q.N));
  for (int64_t k = 0; k < q.K; ++k)
    for (int64_t n = 0; n < q.N; ++n) {
      size_t gi = static_cast<size_t>(q.g_idx[k] * q.N + n);
      w[k * q.N + n] = (static_cast<double>(q.code(k, n)) - q.zeros[gi]) * static_cast<double>(q.scales[gi]);
    }
  return w;
}

CheckpointTensors encode_gptq(const IntQuant& q, GptqFormat format) {
  QLM_CHECK(q.K * q.bits % 32 == 0 && q.N * q.bits % 32 == 0);
  std::vector<uint8_t> stored(q.zeros.size());
  for (size_t i = 0; i < q.zeros.size(); ++i) {
    int32_t z = format == GptqFormat::V1 ? q.zeros[i] - 1 : q.zeros[i];
    if (z < 0) fail("test.quantize_ref", {}, "", "a true zero point of 0 cannot be stored in a GPTQ v1 checkpoint");
    stored[i] = static_cast<uint8_t>(z);
  }
  CheckpointTensors t;
  t["qweight"] = pack_rows(q.codes, q.K, q.N, q.bits);
  t["qzeros"] = pack_cols(stored, q.num_groups, q.N, q.bits);
  t["scales"] = scales_tensor(q.scales, {q.num_groups, q.N}, q.scale_dtype);
  t["g_idx"] = Tensor::from_vector(q.g_idx, {q.K});
  return t;
}

CheckpointTensors encode_awq(const IntQuant& q) {
  QLM_CHECK(q.bits == 4 && q.N % 8 == 0);
  std::vector<uint8_t> z(q.zeros.begin(), q.zeros.end());
  CheckpointTensors t;
  t["qweight"] = awq_pack(q.codes, q.K, q.N);
  t["qzeros"] = awq_pack(z, q.num_groups, q.N);
  t["scales"] = scales_tensor(q.scales, {q.num_groups, q.N}, q.scale_dtype);
  return t;
}

CheckpointTensors encode_ct(const IntQuant& q, bool with_g_idx, DType shape_dtype) {
  CheckpointTensors t;
  t["weight_packed"] = pack_cols(transpose_codes(q.codes, q.K, q.N), q.N, q.K, q.bits);  // [N, K/P]
  std::vector<float> s_t(q.scales.size());
  for (int64_t g = 0; g < q.num_groups; ++g)
    for (int64_t n = 0; n < q.N; ++n) s_t[n * q.num_groups + g] = q.scales[g * q.N + n];
  t["weight_scale"] = scales_tensor(s_t, {q.N, q.num_groups}, q.scale_dtype);
  if (!q.symmetric) {
    std::vector<uint8_t> z_t(q.zeros.size());  // [N, G], packed along N
    for (int64_t g = 0; g < q.num_groups; ++g)
      for (int64_t n = 0; n < q.N; ++n) z_t[n * q.num_groups + g] = static_cast<uint8_t>(q.zeros[g * q.N + n]);
    t["weight_zero_point"] = pack_rows(z_t, q.N, q.num_groups, q.bits);
  }
  if (with_g_idx) t["weight_g_idx"] = Tensor::from_vector(q.g_idx, {q.K});
  t["weight_shape"] = Tensor::from_vector(std::vector<int64_t>{q.N, q.K}, {2}).to(shape_dtype);
  return t;
}

std::vector<double> matmul_ref(const std::vector<float>& x, int64_t M, const std::vector<double>& w, int64_t K,
                               int64_t N) {
  std::vector<double> y(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      double xv = x[m * K + k];
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += xv * w[k * N + n];
    }
  return y;
}

std::unique_ptr<QuantizationConfig> make_quant_config(const std::string& json_text) {
  auto doc = std::make_shared<const nlohmann::json>(io::parse_json_strict(json_text, "config.json"));
  std::optional<io::JsonView> view(io::JsonView(doc, "config.json", "quantization_config"));
  return resolve_quantization_config(view, std::nullopt);
}

namespace {
ShardId shard_of(LinearKind kind, size_t part) {
  switch (kind) {
    case LinearKind::QKV: return part == 0 ? ShardId::q() : part == 1 ? ShardId::k() : ShardId::v();
    case LinearKind::MergedColumn: return ShardId::at(static_cast<int>(part));
    case LinearKind::Replicated:
    case LinearKind::Column:
    case LinearKind::Row: return ShardId::whole();
  }
  return ShardId::whole();
}

std::vector<int64_t> part_sizes(const LinearSpec& s) {
  switch (s.kind) {
    case LinearKind::QKV:
      return {s.total_num_heads * s.head_size, s.total_num_kv_heads * s.head_size,
              s.total_num_kv_heads * (s.v_head_size ? s.v_head_size : s.head_size)};
    case LinearKind::MergedColumn: return s.output_sizes;
    case LinearKind::Replicated:
    case LinearKind::Column:
    case LinearKind::Row: return {s.output_size};
  }
  return {s.output_size};
}
}  // namespace

std::unique_ptr<LinearLayer> build_layer(const LayerFixture& f, const PartTensors& parts, TpContext tp,
                                         const std::vector<std::string>& skip,
                                         const std::function<void(LinearLayer&)>& before_finalize) {
  QuantContext ctx;
  ctx.kernels.linear_backend = f.backend;
  auto layer = std::make_unique<LinearLayer>(f.spec, f.config, ctx, tp);
  for (size_t i = 0; i < parts.size(); ++i)
    for (const auto& [name, tensor] : parts[i]) {
      if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
      const std::string source =
          (f.spec.shard_prefixes.empty() ? f.spec.prefix : f.spec.shard_prefixes[i]) + "." + name;
      layer->load_weight(name, tensor, shard_of(f.spec.kind, i), source);
    }
  if (before_finalize) before_finalize(*layer);
  layer->finalize();
  return layer;
}

std::vector<float> run_layer_tp(const LayerFixture& f, const PartTensors& parts, const std::vector<float>& x,
                                int64_t M, int tp, const std::vector<std::string>& skip) {
  const int64_t K = f.spec.input_size;
  const std::vector<int64_t> sizes = part_sizes(f.spec);
  int64_t N = 0;
  for (int64_t s : sizes) N += s;
  std::vector<float> out(static_cast<size_t>(M * N), 0.f);
  LocalCommGroup group(tp);
  run_on_ranks(tp, [&](int r) {
    TpContext ctx = group.context(r);
    auto layer = build_layer(f, parts, ctx, skip);
    Tensor xin;
    if (f.spec.kind == LinearKind::Row) {
      const int64_t K_p = K / tp;
      std::vector<float> slice(static_cast<size_t>(M * K_p));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K_p; ++k) slice[m * K_p + k] = x[m * K + r * K_p + k];
      xin = Tensor::from_vector(slice, {M, K_p});
    } else {
      xin = Tensor::from_vector(x, {M, K});
    }
    Tensor y = layer->forward(xin);
    const float* yv = y.data<float>();
    const int64_t N_p = y.size(1);
    if (f.spec.kind == LinearKind::Row || f.spec.kind == LinearKind::Replicated) {
      if (r == 0)
        for (int64_t i = 0; i < M * N; ++i) out[i] = yv[i];
      return;
    }
    int64_t local = 0, global = 0;
    for (int64_t size : sizes) {
      const int64_t p = size / tp;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < p; ++j) out[m * N + global + r * p + j] = yv[m * N_p + local + j];
      local += p;
      global += size;
    }
  });
  return out;
}

double normwise_rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace qlm::testing
