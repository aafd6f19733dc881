// A tiny Llama-style decoder block for loader and tensor-parallel tests: the four projections as
// the right parallel layers (qkv_proj QKV, o_proj row, gate_up_proj merged column, down_proj row)
// and a checkpoint with unfused q/k/v/gate/up tensors, as Hugging Face stores them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loader/module_set.h"

namespace qlm::testing {

struct TinyLlamaSizes {
  int64_t hidden = 64;
  int64_t heads = 8;
  int64_t kv_heads = 2;
  int64_t head_dim = 8;  // heads * head_dim == hidden
  int64_t intermediate = 96;
  bool qkv_bias = false;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Checkpoint tensors of one block: "<prefix>.self_attn.{q,k,v,o}_proj.weight" and
// "<prefix>.mlp.{gate,up,down}_proj.weight" ([N, K], `dtype`), q/k/v biases when qkv_bias, and a
// "<prefix>.self_attn.rotary_emb.inv_freq" the model ignores.
NamedTensors tiny_block_tensors(const TinyLlamaSizes& sizes, DType dtype, uint64_t seed,
                                const std::string& prefix = "model.layers.0");

// Adds the block's layers on one rank, the Llama stacked mapping and the rotary ignore pattern.
// `config` null = unquantized.
void add_tiny_block(ModuleSet& modules, const TinyLlamaSizes& sizes, const QuantizationConfig* config,
                    const QuantContext& ctx, TpContext tp, DType params_dtype,
                    const std::string& prefix = "model.layers.0");

// y[M, N] = x[M, K] · Wᵀ + b in double, W (and b) read from `tensors` as "<module>.weight" ("<module>.bias").
std::vector<double> dense_reference(const NamedTensors& tensors, const std::string& module, const std::vector<float>& x,
                                    int64_t M);

const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name);

}  // namespace qlm::testing
