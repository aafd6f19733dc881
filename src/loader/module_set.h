// What a model exposes to the loader: its linear layers keyed by module prefix, plain dense
// tensors keyed by full checkpoint name (embeddings, norms), the stacked-params mapping that sends
// unfused checkpoint tensors (q_proj, gate_proj, ...) to fused layers (FORMATS.md §4.3), and the
// checkpoint tensors the model deliberately does not use.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/linear.h"
#include "layers/parameter.h"

namespace qlm {

// A checkpoint module suffix that belongs to a fused layer: ".q_proj" -> (".qkv_proj", q).
struct StackedParam {
  std::string part;   // suffix of the checkpoint module name, e.g. ".gate_proj"
  std::string fused;  // suffix of the model's fused module, e.g. ".gate_up_proj"
  ShardId shard;
};

// The Llama-family mapping: q/k/v -> qkv_proj, gate/up -> gate_up_proj.
std::vector<StackedParam> llama_stacked_params();

class ModuleSet {
 public:
  ModuleSet() = default;
  ModuleSet(const ModuleSet&) = delete;
  ModuleSet& operator=(const ModuleSet&) = delete;
  ModuleSet(ModuleSet&&) = default;
  ModuleSet& operator=(ModuleSet&&) = default;

  // Linear layers, keyed by prefix ("loader.duplicate_module" if the prefix is taken).
  LinearLayer& add_linear(std::unique_ptr<LinearLayer> layer);
  LinearLayer& add_linear(LinearSpec spec, const QuantizationConfig* config, const QuantContext& ctx, TpContext tp);
  LinearLayer* find_linear(std::string_view prefix);
  LinearLayer& linear(std::string_view prefix);  // "loader.unknown_module" if absent
  const std::map<std::string, std::unique_ptr<LinearLayer>, std::less<>>& linears() const { return linears_; }

  // A plain tensor loaded whole under its full checkpoint name, with exactly this shape and dtype
  // (e.g. "model.embed_tokens.weight", "model.norm.weight"). Read it with dense(name) after loading.
  Parameter& add_dense(std::string name, Shape shape, DType dtype, bool optional = false);
  Parameter* find_dense(std::string_view name);
  const Tensor& dense(std::string_view name);  // "loader.unknown_tensor" if not registered
  const std::map<std::string, Parameter, std::less<>>& dense_params() const { return dense_; }

  void add_stacked(StackedParam mapping) { stacked_.push_back(std::move(mapping)); }
  void add_stacked(const std::vector<StackedParam>& mappings);
  const std::vector<StackedParam>& stacked() const { return stacked_; }

  // Checkpoint tensors to skip: a glob ('*', '?', '[') matched against the whole name, otherwise a
  // substring ("rotary_emb.inv_freq").
  void ignore(std::string pattern) { ignored_.push_back(std::move(pattern)); }
  bool is_ignored(std::string_view tensor_name) const;

  // Where a checkpoint tensor goes.
  struct Target {
    LinearLayer* layer = nullptr;  // set for linear-layer tensors
    Parameter* dense = nullptr;    // set for dense tensors
    std::string param;             // param name in the layer (last name component)
    ShardId shard;
  };
  // Resolves a checkpoint tensor name: dense names first, then "<module>.<param>" with the stacked
  // mapping applied when the fused layer exists, then the module itself. nullopt: no consumer.
  std::optional<Target> resolve(const std::string& tensor_name);

 private:
  std::map<std::string, std::unique_ptr<LinearLayer>, std::less<>> linears_;
  std::map<std::string, Parameter, std::less<>> dense_;
  std::vector<StackedParam> stacked_;
  std::vector<std::string> ignored_;
};

}  // namespace qlm
