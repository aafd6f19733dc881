#include "support/moe_cases.h"

#include <algorithm>
#include <cmath>

#include "quant/w8a8_test_util.h"
#include "support/quantize_ref.h"

namespace qlm::testing::moe {
namespace {

std::vector<float> weight_nk(int64_t N, int64_t K, uint64_t seed) {
  std::vector<float> w = random_weights(N, K, seed);
  for (float& v : w) v /= std::sqrt(static_cast<float>(K));
  return w;
}

std::vector<float> transpose(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> t(w.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = w[r * cols + c];
  return t;
}
std::vector<double> transpose(const std::vector<double>& w, int64_t rows, int64_t cols) {
  std::vector<double> t(w.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = w[r * cols + c];
  return t;
}

Proj dense_proj(const std::vector<float>& w, int64_t N, int64_t K, DType dtype) {
  Proj p;
  Tensor t = Tensor::from_vector(w, {N, K}).to(dtype);
  p.tensors["weight"] = t;
  const Tensor d = t.to(DType::F64);
  p.deq.assign(d.span<double>().begin(), d.span<double>().end());
  return p;
}

// Integer weight-only formats go through IntQuant, whose weight is [K, N].
Proj int_proj(const IntQuant& q, CheckpointTensors tensors) {
  return Proj{.tensors = std::move(tensors), .deq = transpose(dequantize(q), q.K, q.N)};
}

// Requantizes fp8 per-tensor part codes from scale s to scale m (FORMATS.md §6), independently.
std::vector<double> fp8_requant(const Proj& p, float m) {
  const float s = p.tensors.at("weight_scale").data<float>()[0];
  const Tensor& codes = p.tensors.at("weight");
  std::vector<double> out(static_cast<size_t>(codes.numel()));
  for (int64_t j = 0; j < codes.numel(); ++j) {
    const uint8_t c = codes.data<uint8_t>()[j];
    const uint8_t q = s == m ? c : f32_to_e4m3(std::clamp(e4m3_to_f32(c) * s * (1.0f / m), -448.f, 448.f));
    out[j] = double(e4m3_to_f32(q)) * m;
  }
  return out;
}

}  // namespace

Checkpoint make_checkpoint(const Case& c, const MoEExpertNames& names, uint64_t seed) {
  Checkpoint ck;
  for (int64_t e = 0; e < kE; ++e) {
    const std::string base = fmt::format("{}.experts.{}.", kPrefix, e);
    Proj gate = c.quantize(weight_nk(kI, kH, seed + 10 * e), kI, kH, 0);
    Proj up = c.quantize(weight_nk(kI, kH, seed + 10 * e + 1), kI, kH, 1);
    Proj down = c.quantize(weight_nk(kH, kI, seed + 10 * e + 2), kH, kI, 2);
    ExpertRef r{.gate = gate.deq, .up = up.deq, .down = down.deq};
    if (c.requant_w13) {
      const float m =
          std::max(gate.tensors.at("weight_scale").data<float>()[0], up.tensors.at("weight_scale").data<float>()[0]);
      r.gate = fp8_requant(gate, m);
      r.up = fp8_requant(up, m);
    }
    ck.ref.push_back(std::move(r));
    for (auto& [module, proj] : {std::pair{names.gate, &gate}, {names.up, &up}, {names.down, &down}})
      for (auto& [suffix, t] : proj->tensors) ck.tensors.emplace_back(base + module + "." + suffix, t);
  }
  return ck;
}

namespace {

std::vector<double> act_quant(const std::vector<double>& v, int64_t M, int64_t K, const Case& c) {
  if (c.act == RefAct::None) return v;
  std::vector<float> f(v.begin(), v.end());
  return ref_acts(f, M, K, c.act, 0, 0, c.act_group);
}

// y[t] = Σ_j w_tj · down_e (silu(gate_e x) ⊙ up_e x), e = ids[t, j], in double.
// Dynamic activation scales of w2's input are per token on each rank's slice of the intermediate
// size (as the row-parallel kernel sees it), so the reference quantizes per slice of I / tp.
}  // namespace

namespace {
// v rounded to `dtype` (F64: unchanged).
std::vector<double> round_to(std::vector<double> v, DType dtype) {
  if (dtype == DType::F64 || dtype == DType::F32) return v;
  const std::vector<float> f(v.begin(), v.end());
  const std::vector<float> r = Tensor::from_vector(f, {static_cast<int64_t>(f.size())}).to(dtype).to_float_vector();
  return {r.begin(), r.end()};
}
}  // namespace

std::vector<double> reference(const Case& c, const std::vector<ExpertRef>& ref, const std::vector<float>& x,
                              const MoERouting& r, int tp, DType inter) {
  const int64_t T = r.tokens;
  QLM_CHECK(static_cast<int64_t>(x.size()) == T * kH && r.top_k == kTopK);
  std::vector<double> y(static_cast<size_t>(T * kH), 0.0);
  const std::vector<double> xd = act_quant(std::vector<double>(x.begin(), x.end()), T, kH, c);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < kTopK; ++j) {
      const ExpertRef& e = ref[static_cast<size_t>(r.topk_ids[t * kTopK + j])];
      std::vector<double> g(static_cast<size_t>(kI), 0.0), u(static_cast<size_t>(kI), 0.0);
      for (int64_t i = 0; i < kI; ++i)
        for (int64_t h = 0; h < kH; ++h) {
          g[i] += e.gate[i * kH + h] * xd[t * kH + h];
          u[i] += e.up[i * kH + h] * xd[t * kH + h];
        }
      g = round_to(std::move(g), inter);
      u = round_to(std::move(u), inter);
      std::vector<double> a(static_cast<size_t>(kI));
      for (int64_t i = 0; i < kI; ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      a = round_to(std::move(a), inter);
      const int64_t slice = kI / tp;
      for (int64_t s0 = 0; s0 < kI; s0 += slice) {
        const std::vector<double> q =
            act_quant(std::vector<double>(a.begin() + s0, a.begin() + s0 + slice), 1, slice, c);
        std::copy(q.begin(), q.end(), a.begin() + s0);
      }
      for (int64_t h = 0; h < kH; ++h) {
        double o = 0;
        for (int64_t i = 0; i < kI; ++i) o += e.down[h * kI + i] * a[i];
        y[t * kH + h] += r.topk_weights[t * kTopK + j] * o;
      }
    }
  return y;
}

FusedMoESpec moe_spec(const MoEExpertNames& names) {
  FusedMoESpec s;
  s.prefix = kPrefix;
  s.num_experts = kE;
  s.top_k = kTopK;
  s.hidden_size = kH;
  s.intermediate_size = kI;
  s.renormalize = true;
  s.names = names;
  return s;
}

std::vector<Case> cases() {
  auto gptq = [](bool sym, bool act_order) {
    return [=](const std::vector<float>& w, int64_t N, int64_t K, int part) {
      const QuantOptions o{.bits = 4,
                           .group_size = 32,
                           .symmetric = sym,
                           .act_order_seed = act_order ? std::optional<uint64_t>(part == 2 ? 8 : 7) : std::nullopt,
                           .scale_dtype = DType::F16,
                           .min_zero = 1};
      IntQuant q = quantize_gptq(transpose(w, N, K), K, N, o);
      return int_proj(q, encode_gptq(q, GptqFormat::V1));
    };
  };
  return {
      {.name = "unquantized_f32",
       .config_json = "",
       .quantize = [](const std::vector<float>& w, int64_t N, int64_t K,
                      int) { return dense_proj(w, N, K, DType::F32); }},
      {.name = "unquantized_bf16",
       .config_json = "",
       .quantize = [](const std::vector<float>& w, int64_t N, int64_t K,
                      int) { return dense_proj(w, N, K, DType::BF16); },
       .dtype = DType::BF16},
      {.name = "gptq_sym",
       .config_json = R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true})",
       .quantize = gptq(true, false)},
      {.name = "gptq_asym_act_order",
       .config_json = R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": true, "sym": false})",
       .quantize = gptq(false, true)},
      {.name = "awq",
       .config_json = R"({"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true, "version": "gemm"})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int) {
             IntQuant q = quantize_awq(transpose(w, N, K), K, N, 32);
             return int_proj(q, encode_awq(q));
           }},
      {.name = "ct_wna16_asym",
       .config_json = R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
           "symmetric": false, "strategy": "group", "group_size": 32}}}})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int) {
             IntQuant q = quantize_ct(transpose(w, N, K), K, N,
                                      {.bits = 4,
                                       .group_size = 32,
                                       .symmetric = false,
                                       .act_order_seed = std::nullopt,
                                       .scale_dtype = DType::BF16,
                                       .min_zero = 0});
             return int_proj(q, encode_ct(q, false));
           }},
      {.name = "fp8_tensor",
       .config_json = R"({"quant_method": "fp8", "activation_scheme": "dynamic"})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int part) {
             W8Part p = fp8_tensor_part(w, N, K, part == 1 ? 1.6f : 1.0f);
             return Proj{.tensors = p.tensors, .deq = p.deq};
           },
       .act = RefAct::Fp8Token,
       .tol = 1e-3,
       .requant_w13 = true},
      {.name = "fp8_channel",
       .config_json = R"({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
           "symmetric": true, "strategy": "channel", "dynamic": false}, "input_activations": {"num_bits": 8,
           "type": "float", "symmetric": true, "strategy": "token", "dynamic": true}}}})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int) {
             W8Part p = channel_part(w, N, K, false);
             return Proj{.tensors = p.tensors, .deq = p.deq};
           },
       .act = RefAct::Fp8Token,
       .tol = 1e-3},
      {.name = "fp8_block",
       .config_json = R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32]})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int) {
             W8Part p = fp8_block_part(w, N, K, 32, 32);
             return Proj{.tensors = p.tensors, .deq = p.deq};
           },
       .act = RefAct::Fp8Group,
       .act_group = 32,
       .tol = 1e-3},
      {.name = "int8_w8a8",
       .config_json = R"({"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int",
           "symmetric": true, "strategy": "channel", "dynamic": false}, "input_activations": {"num_bits": 8,
           "type": "int", "symmetric": true, "strategy": "token", "dynamic": true}}}})",
       .quantize =
           [](const std::vector<float>& w, int64_t N, int64_t K, int) {
             W8Part p = channel_part(w, N, K, true);
             return Proj{.tensors = p.tensors, .deq = p.deq};
           },
       .act = RefAct::Int8Token,
       .tol = 1e-3},
  };
}

}  // namespace qlm::testing::moe
