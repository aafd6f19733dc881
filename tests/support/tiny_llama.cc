#include "support/tiny_llama.h"

#include "support/quantize_ref.h"

namespace qlm::testing {

namespace {
Tensor random_matrix(int64_t rows, int64_t cols, DType dtype, uint64_t seed, float scale) {
  std::vector<float> v = random_weights(rows, cols, seed);
  for (float& f : v) f *= scale;
  return Tensor::from_vector(v, {rows, cols}).to(dtype);
}
}  // namespace

NamedTensors tiny_block_tensors(const TinyLlamaSizes& s, DType dtype, uint64_t seed, const std::string& prefix) {
  const std::string attn = prefix + ".self_attn.", mlp = prefix + ".mlp.";
  const float scale = 0.125f;
  NamedTensors t;
  t.emplace_back(attn + "q_proj.weight", random_matrix(s.heads * s.head_dim, s.hidden, dtype, seed + 1, scale));
  t.emplace_back(attn + "k_proj.weight", random_matrix(s.kv_heads * s.head_dim, s.hidden, dtype, seed + 2, scale));
  t.emplace_back(attn + "v_proj.weight", random_matrix(s.kv_heads * s.head_dim, s.hidden, dtype, seed + 3, scale));
  t.emplace_back(attn + "o_proj.weight", random_matrix(s.hidden, s.heads * s.head_dim, dtype, seed + 4, scale));
  t.emplace_back(mlp + "gate_proj.weight", random_matrix(s.intermediate, s.hidden, dtype, seed + 5, scale));
  t.emplace_back(mlp + "up_proj.weight", random_matrix(s.intermediate, s.hidden, dtype, seed + 6, scale));
  t.emplace_back(mlp + "down_proj.weight", random_matrix(s.hidden, s.intermediate, dtype, seed + 7, scale));
  if (s.qkv_bias) {
    t.emplace_back(attn + "q_proj.bias", random_matrix(1, s.heads * s.head_dim, dtype, seed + 8, 1.0f).view({s.heads * s.head_dim}));
    t.emplace_back(attn + "k_proj.bias", random_matrix(1, s.kv_heads * s.head_dim, dtype, seed + 9, 1.0f).view({s.kv_heads * s.head_dim}));
    t.emplace_back(attn + "v_proj.bias", random_matrix(1, s.kv_heads * s.head_dim, dtype, seed + 10, 1.0f).view({s.kv_heads * s.head_dim}));
  }
  t.emplace_back(attn + "rotary_emb.inv_freq", Tensor::zeros({s.head_dim / 2}, DType::F32));
  return t;
}

void add_tiny_block(ModuleSet& modules, const TinyLlamaSizes& s, const QuantizationConfig* config,
                    const QuantContext& ctx, TpContext tp, DType params_dtype, const std::string& prefix) {
  const std::string attn = prefix + ".self_attn.", mlp = prefix + ".mlp.";
  LinearSpec qkv{.prefix = attn + "qkv_proj", .kind = LinearKind::QKV, .input_size = s.hidden, .bias = s.qkv_bias,
                 .params_dtype = params_dtype};
  qkv.head_size = s.head_dim;
  qkv.total_num_heads = s.heads;
  qkv.total_num_kv_heads = s.kv_heads;
  qkv.shard_prefixes = {attn + "q_proj", attn + "k_proj", attn + "v_proj"};
  modules.add_linear(qkv, config, ctx, tp);

  LinearSpec o{.prefix = attn + "o_proj", .kind = LinearKind::Row, .input_size = s.heads * s.head_dim,
               .output_size = s.hidden, .params_dtype = params_dtype};
  modules.add_linear(o, config, ctx, tp);

  LinearSpec gate_up{.prefix = mlp + "gate_up_proj", .kind = LinearKind::MergedColumn, .input_size = s.hidden,
                     .params_dtype = params_dtype};
  gate_up.output_sizes = {s.intermediate, s.intermediate};
  gate_up.shard_prefixes = {mlp + "gate_proj", mlp + "up_proj"};
  modules.add_linear(gate_up, config, ctx, tp);

  LinearSpec down{.prefix = mlp + "down_proj", .kind = LinearKind::Row, .input_size = s.intermediate,
                  .output_size = s.hidden, .params_dtype = params_dtype};
  modules.add_linear(down, config, ctx, tp);

  if (modules.stacked().empty()) modules.add_stacked(llama_stacked_params());
  modules.ignore("rotary_emb.inv_freq");
}

const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw std::runtime_error("test tensor not found: " + name);
}

std::vector<double> dense_reference(const NamedTensors& tensors, const std::string& module, const std::vector<float>& x,
                                    int64_t M) {
  Tensor w = find_tensor(tensors, module + ".weight").to(DType::F64);
  const int64_t N = w.size(0), K = w.size(1);
  std::vector<double> bias(static_cast<size_t>(N), 0.0);
  for (const auto& [n, t] : tensors)
    if (n == module + ".bias") {
      Tensor b = t.to(DType::F64);
      bias.assign(b.span<double>().begin(), b.span<double>().end());
    }
  const double* wp = w.data<double>();
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias[static_cast<size_t>(n)];
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(x[static_cast<size_t>(m * K + k)]) * wp[n * K + k];
      y[static_cast<size_t>(m * N + n)] = acc;
    }
  return y;
}

}  // namespace qlm::testing
