// Writes a quantized checkpoint with random weights (for decode benchmarks of shapes too large to commit), Llama-3
// shaped or, with experts, Qwen3-MoE shaped (routed experts in every layer, q / k norms, an unquantized router):
// config.json, one safetensors shard per decoder layer plus one for the embedding, final norm and lm_head, and
// model.safetensors.index.json. Three formats:
//  - SyntheticFormat::Gptq4: GPTQ v1 int4, symmetric, group `group`, lm_head quantized (what AutoGPTQ / GPTQModel
//    write with lm_head quantization);
//  - SyntheticFormat::Fp8Dynamic: compressed-tensors FP8 e4m3 weights with per-channel BF16 scales and dynamic
//    per-token activations, lm_head unquantized (F16), as llm-compressor's FP8_DYNAMIC scheme writes them;
//  - SyntheticFormat::Int8Dynamic: compressed-tensors INT8 weights [N, K] with per-channel BF16 scales and dynamic
//    symmetric per-token activations, lm_head unquantized, as llm-compressor's W8A8 (INT8) scheme writes them.
// Embedding, norms and router F16. Codes are uniform random, scales small, so activations stay finite through the
// layers. Memory use is one shard at a time.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/float_convert.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"

namespace qlm::bench {

enum class SyntheticFormat { Gptq4, Fp8Dynamic, Int8Dynamic };

// The defaults are Llama-3-8B; experts > 0 makes a Qwen3-MoE-shaped model (synthetic_qwen3_30b_a3b()).
struct SyntheticShape {
  int64_t hidden = 4096;
  int64_t intermediate = 14336;  // the dense MLP's width (Llama); unused with experts
  int64_t layers = 32;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 0;  // 0: hidden / heads
  int64_t vocab = 128256;
  int64_t group = 128;
  int64_t experts = 0;  // routed experts per layer (Qwen3-MoE); 0: a dense Llama MLP
  int64_t top_k = 0;
  int64_t moe_intermediate = 0;
  SyntheticFormat format = SyntheticFormat::Gptq4;
  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden / heads; }
};

// Qwen3-30B-A3B: 48 layers of 128 experts (top-8, width 768), 32 query / 4 kv heads of 128, vocab 151936.
inline SyntheticShape synthetic_qwen3_30b_a3b() {
  return SyntheticShape{.hidden = 2048,
                        .intermediate = 6144,
                        .layers = 48,
                        .heads = 32,
                        .kv_heads = 4,
                        .head_dim = 128,
                        .vocab = 151936,
                        .group = 128,
                        .experts = 128,
                        .top_k = 8,
                        .moe_intermediate = 768};
}

namespace detail {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random 32-bit words, filled in parallel chunks (each chunk seeded from `seed` and its index).
inline Tensor random_words(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::I32);
  uint32_t* w = reinterpret_cast<uint32_t*>(t.raw_data());
  const int64_t n = t.numel();
  compute_pool().parallel_for(0, (n + 4095) / 4096, 1, [&](int64_t b, int64_t e) {
    for (int64_t chunk = b; chunk < e; ++chunk) {
      uint64_t state = seed * 0x100000001b3ull + static_cast<uint64_t>(chunk);
      for (int64_t i = chunk * 4096; i < std::min(n, (chunk + 1) * 4096); i += 2) {
        const uint64_t r = splitmix64(state);
        w[i] = static_cast<uint32_t>(r);
        if (i + 1 < n) w[i + 1] = static_cast<uint32_t>(r >> 32);
      }
    }
  });
  return t;
}

// value + jitter * u with u uniform in [-0.5, 0.5), each element rounded once to `dtype` (F16 or BF16).
inline Tensor half_filled(Shape shape, DType dtype, float value, uint64_t seed, float jitter) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  uint16_t* p = reinterpret_cast<uint16_t*>(t.raw_data());
  uint64_t state = seed;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53 - 0.5;
    const float v = value + jitter * static_cast<float>(u);
    p[i] = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
  }
  return t;
}
inline Tensor f16_filled(Shape shape, float value, uint64_t seed, float jitter) {
  return half_filled(std::move(shape), DType::F16, value, seed, jitter);
}

using Named = std::vector<std::pair<std::string, Tensor>>;

// GPTQ tensors of one linear layer [K -> N] under `module`.
inline void add_gptq_linear(Named& out, const std::string& module, int64_t K, int64_t N, int64_t group, uint64_t seed) {
  const int64_t groups = K / group;
  out.emplace_back(module + ".qweight", random_words({K / 8, N}, seed));
  Tensor zeros = Tensor::empty({groups, N / 8}, DType::I32);
  for (int32_t& z : zeros.span<int32_t>()) z = 0x77777777;  // v1: stored zero 7 = 8 - 1
  out.emplace_back(module + ".qzeros", zeros);
  // |code - 8| <= 8, so a scale of 1/(4 sqrt(K)) keeps each output near unit size.
  const float scale = 0.25f / std::sqrt(static_cast<float>(K));
  out.emplace_back(module + ".scales", f16_filled({groups, N}, scale, seed + 1, scale * 0.2f));
  Tensor g_idx = Tensor::empty({K}, DType::I32);
  int32_t* g = g_idx.data<int32_t>();
  for (int64_t k = 0; k < K; ++k) g[k] = static_cast<int32_t>(k / group);
  out.emplace_back(module + ".g_idx", g_idx);
}

// Compressed-tensors FP8 tensors of one linear layer [K -> N] under `module`: e4m3 codes [N, K] with exponents
// 2^-2..2^1 (|w| in [0.25, 3.75], no NaN or subnormal codes) and one BF16 scale per output channel [N, 1].
inline void add_fp8_linear(Named& out, const std::string& module, int64_t K, int64_t N, uint64_t seed) {
  Tensor codes = Tensor::empty({N, K}, DType::F8_E4M3);
  const Tensor words = random_words({(N * K + 3) / 4}, seed);
  const uint8_t* r = reinterpret_cast<const uint8_t*>(words.raw_data());
  uint8_t* c = reinterpret_cast<uint8_t*>(codes.raw_data());
  for (int64_t i = 0, n = N * K; i < n; ++i) {
    const uint8_t sign = r[i] & 0x80, exponent = static_cast<uint8_t>(5 + ((r[i] >> 3) & 3)), mantissa = r[i] & 7;
    c[i] = static_cast<uint8_t>(sign | exponent << 3 | mantissa);
  }
  out.emplace_back(module + ".weight", std::move(codes));
  // |w| <= 3.75 with a mean square near 2.6, so a scale of 1/(2 sqrt(K)) keeps each output near unit size.
  const float scale = 0.5f / std::sqrt(static_cast<float>(K));
  out.emplace_back(module + ".weight_scale", half_filled({N, 1}, DType::BF16, scale, seed + 1, scale * 0.2f));
}

// Compressed-tensors INT8 tensors of one linear layer [K -> N] under `module`: codes [N, K] uniform in [-128, 127]
// and one BF16 scale per output channel [N, 1].
inline void add_int8_linear(Named& out, const std::string& module, int64_t K, int64_t N, uint64_t seed) {
  Tensor codes = Tensor::empty({N, K}, DType::I8);
  const Tensor words = random_words({(N * K + 3) / 4}, seed);
  std::copy_n(reinterpret_cast<const int8_t*>(words.raw_data()), N * K, codes.data<int8_t>());
  out.emplace_back(module + ".weight", std::move(codes));
  // Uniform codes have a mean square near 128^2 / 3, so a scale of 1/(74 sqrt(K)) keeps each output near unit size.
  const float scale = 1.0f / (74.0f * std::sqrt(static_cast<float>(K)));
  out.emplace_back(module + ".weight_scale", half_filled({N, 1}, DType::BF16, scale, seed + 1, scale * 0.2f));
}

// One linear layer [K -> N] under `module` in the checkpoint's format.
inline void add_linear(Named& out, const SyntheticShape& s, const std::string& module, int64_t K, int64_t N,
                       uint64_t seed) {
  if (s.format == SyntheticFormat::Fp8Dynamic) {
    add_fp8_linear(out, module, K, N, seed);
  } else if (s.format == SyntheticFormat::Int8Dynamic) {
    add_int8_linear(out, module, K, N, seed);
  } else {
    add_gptq_linear(out, module, K, N, s.group, seed);
  }
}

// compressed-tensors' quantization_config for 8-bit weights (per channel) and dynamic per-token activations on
// every Linear but lm_head: FP8 e4m3 ("float") or INT8 ("int"), both symmetric.
inline nlohmann::json w8a8_dynamic_quantization_config(bool int8) {
  const char* type = int8 ? "int" : "float";
  const char* format = int8 ? "int-quantized" : "float-quantized";
  const nlohmann::json weights = {{"num_bits", 8},       {"type", type},        {"strategy", "channel"},
                                  {"symmetric", true},   {"dynamic", false},    {"group_size", nullptr},
                                  {"actorder", nullptr}, {"observer", "minmax"}};
  const nlohmann::json inputs = {{"num_bits", 8},       {"type", type},       {"strategy", "token"},
                                 {"symmetric", true},   {"dynamic", true},    {"group_size", nullptr},
                                 {"actorder", nullptr}, {"observer", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          {"format", format},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs}, {"format", format}}}}},
          {"ignore", {"lm_head"}},
          {"kv_cache_scheme", nullptr}};
}

}  // namespace detail

// The name of shard `index` (0-based) of `shards`: model-00001-of-00033.safetensors.
inline std::string synthetic_shard_name(int64_t index, int64_t shards) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, shards);
}

// Every file write_synthetic_checkpoint may leave in its directory, in-progress ones included
// (what an interrupted run has to remove).
inline std::vector<std::string> synthetic_checkpoint_files(const SyntheticShape& s) {
  std::vector<std::string> files = {"config.json", "model.safetensors.index.json"};
  for (int64_t i = 0; i <= s.layers; ++i) {
    files.push_back(synthetic_shard_name(i, s.layers + 1));
    files.push_back(synthetic_shard_name(i, s.layers + 1) + ".partial");  // io::write_safetensors' temporary
  }
  return files;
}

// Returns the bytes written. Throws qlm::Error (io) on write failures.
inline uint64_t write_synthetic_checkpoint(const std::filesystem::path& dir, const SyntheticShape& s,
                                           uint64_t seed = 1) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const int64_t head_dim = s.head_size();
  const bool moe = s.experts > 0;
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", "llama"},
                           {"hidden_size", s.hidden},
                           {"intermediate_size", s.intermediate},
                           {"num_hidden_layers", s.layers},
                           {"num_attention_heads", s.heads},
                           {"num_key_value_heads", s.kv_heads},
                           {"vocab_size", s.vocab},
                           {"head_dim", head_dim},
                           {"max_position_embeddings", 8192},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 500000.0},
                           {"rope_scaling",
                            {{"rope_type", "llama3"},
                             {"factor", 8.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}}},
                           {"tie_word_embeddings", false},
                           {"hidden_act", "silu"},
                           {"torch_dtype", "float16"},
                           {"bos_token_id", 128000},
                           {"eos_token_id", 128001},
                           {"quantization_config",
                            {{"quant_method", "gptq"},
                             {"bits", 4},
                             {"group_size", s.group},
                             {"desc_act", false},
                             {"sym", true},
                             {"lm_head", true},
                             {"checkpoint_format", "gptq"}}}};
  if (s.format == SyntheticFormat::Fp8Dynamic || s.format == SyntheticFormat::Int8Dynamic) {
    config["quantization_config"] = detail::w8a8_dynamic_quantization_config(s.format == SyntheticFormat::Int8Dynamic);
    // llm-compressor's MoE recipes leave the router unquantized too.
    if (moe) config["quantization_config"]["ignore"].push_back("re:.*mlp.gate$");
  }
  if (moe) {  // Qwen3-MoE: its own names, rope and ids; every layer sparse
    config["architectures"] = {"Qwen3MoeForCausalLM"};
    config["model_type"] = "qwen3_moe";
    config["rms_norm_eps"] = 1e-6;
    config["rope_theta"] = 1000000.0;
    config.erase("rope_scaling");
    config["max_position_embeddings"] = 40960;
    config["bos_token_id"] = 151643;
    config["eos_token_id"] = 151645;
    config["attention_bias"] = false;
    config["num_experts"] = s.experts;
    config["num_experts_per_tok"] = s.top_k;
    config["moe_intermediate_size"] = s.moe_intermediate;
    config["norm_topk_prob"] = true;
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = nlohmann::json::array();
  }
  std::ofstream(dir / "config.json") << config.dump(2) << "\n";

  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0, written = 0;
  const int64_t shards = s.layers + 1;
  auto write_shard = [&](int64_t index, const detail::Named& tensors) {
    const std::string name = synthetic_shard_name(index, shards);
    io::write_safetensors(dir / name, tensors, {{"format", "pt"}});
    for (const auto& [tensor, t] : tensors) {
      weight_map[tensor] = name;
      total += t.nbytes();
    }
    written += fs::file_size(dir / name);
  };
  for (int64_t l = 0; l < s.layers; ++l) {
    detail::Named t;
    const std::string p = fmt::format("model.layers.{}.", l);
    const uint64_t base = seed * 1000 + static_cast<uint64_t>(l) * 16;
    detail::add_linear(t, s, p + "self_attn.q_proj", s.hidden, s.heads * head_dim, base + 1);
    detail::add_linear(t, s, p + "self_attn.k_proj", s.hidden, s.kv_heads * head_dim, base + 2);
    detail::add_linear(t, s, p + "self_attn.v_proj", s.hidden, s.kv_heads * head_dim, base + 3);
    detail::add_linear(t, s, p + "self_attn.o_proj", s.heads * head_dim, s.hidden, base + 4);
    if (moe) {
      t.emplace_back(p + "self_attn.q_norm.weight", detail::f16_filled({head_dim}, 1.0f, base + 10, 0.1f));
      t.emplace_back(p + "self_attn.k_norm.weight", detail::f16_filled({head_dim}, 1.0f, base + 11, 0.1f));
      // Router logits of a few units, so the tokens spread over the experts.
      t.emplace_back(p + "mlp.gate.weight", detail::f16_filled({s.experts, s.hidden}, 0.0f, base + 12, 0.5f));
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string x = fmt::format("{}mlp.experts.{}.", p, e);
        const uint64_t eb = base * 1000 + static_cast<uint64_t>(e) * 4;
        detail::add_linear(t, s, x + "gate_proj", s.hidden, s.moe_intermediate, eb + 1);
        detail::add_linear(t, s, x + "up_proj", s.hidden, s.moe_intermediate, eb + 2);
        detail::add_linear(t, s, x + "down_proj", s.moe_intermediate, s.hidden, eb + 3);
      }
    } else {
      detail::add_linear(t, s, p + "mlp.gate_proj", s.hidden, s.intermediate, base + 5);
      detail::add_linear(t, s, p + "mlp.up_proj", s.hidden, s.intermediate, base + 6);
      detail::add_linear(t, s, p + "mlp.down_proj", s.intermediate, s.hidden, base + 7);
    }
    t.emplace_back(p + "input_layernorm.weight", detail::f16_filled({s.hidden}, 1.0f, base + 8, 0.1f));
    t.emplace_back(p + "post_attention_layernorm.weight", detail::f16_filled({s.hidden}, 1.0f, base + 9, 0.1f));
    write_shard(l, t);
  }
  detail::Named last;
  last.emplace_back("model.embed_tokens.weight", detail::f16_filled({s.vocab, s.hidden}, 0.0f, seed + 7, 2.0f));
  last.emplace_back("model.norm.weight", detail::f16_filled({s.hidden}, 1.0f, seed + 8, 0.1f));
  if (s.format != SyntheticFormat::Gptq4) {  // lm_head stays unquantized, as llm-compressor leaves it
    last.emplace_back("lm_head.weight", detail::f16_filled({s.vocab, s.hidden}, 0.0f, seed + 9, 0.5f));
  } else {
    detail::add_gptq_linear(last, "lm_head", s.hidden, s.vocab, s.group, seed + 9);
  }
  write_shard(s.layers, last);

  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(1) << "\n";
  return written;
}

}  // namespace qlm::bench
