#include "loader/module_set.h"

#include <fnmatch.h>

namespace qlm {

std::vector<StackedParam> llama_stacked_params() {
  return {{".q_proj", ".qkv_proj", ShardId::q()},
          {".k_proj", ".qkv_proj", ShardId::k()},
          {".v_proj", ".qkv_proj", ShardId::v()},
          {".gate_proj", ".gate_up_proj", ShardId::at(0)},
          {".up_proj", ".gate_up_proj", ShardId::at(1)}};
}

LinearLayer& ModuleSet::add_linear(std::unique_ptr<LinearLayer> layer) {
  QLM_CHECK(layer != nullptr);
  std::string prefix = layer->prefix();
  auto [it, inserted] = linears_.emplace(prefix, std::move(layer));
  if (!inserted)
    fail("loader.duplicate_module", {.file = {}, .tensor = {}, .layer = prefix}, "",
         "a linear layer with this prefix is already registered");
  return *it->second;
}

LinearLayer& ModuleSet::add_linear(LinearSpec spec, const QuantizationConfig* config, const QuantContext& ctx,
                                   TpContext tp) {
  return add_linear(std::make_unique<LinearLayer>(std::move(spec), config, ctx, tp));
}

LinearLayer* ModuleSet::find_linear(std::string_view prefix) {
  auto it = linears_.find(prefix);
  return it == linears_.end() ? nullptr : it->second.get();
}

LinearLayer& ModuleSet::linear(std::string_view prefix) {
  if (LinearLayer* l = find_linear(prefix)) return *l;
  fail("loader.unknown_module", {.file = {}, .tensor = {}, .layer = std::string(prefix)}, "",
       "no linear layer with this prefix is registered");
}

Parameter& ModuleSet::add_dense(std::string name, Shape shape, DType dtype, bool optional) {
  Parameter p(name, ParamKind::Replicated, std::move(shape), dtype);
  p.optional = optional;
  auto [it, inserted] = dense_.emplace(name, std::move(p));
  if (!inserted)
    fail("loader.duplicate_module", {.file = {}, .tensor = name, .layer = {}}, "",
         "a dense tensor with this name is already registered");
  return it->second;
}

Parameter* ModuleSet::find_dense(std::string_view name) {
  auto it = dense_.find(name);
  return it == dense_.end() ? nullptr : &it->second;
}

const Tensor& ModuleSet::dense(std::string_view name) {
  if (Parameter* p = find_dense(name)) return p->data();
  fail("loader.unknown_tensor", {.file = {}, .tensor = std::string(name), .layer = {}}, "",
       "no dense tensor with this name is registered");
}

void ModuleSet::add_stacked(const std::vector<StackedParam>& mappings) {
  stacked_.insert(stacked_.end(), mappings.begin(), mappings.end());
}

bool ModuleSet::is_ignored(std::string_view tensor_name) const {
  const std::string name(tensor_name);
  for (const std::string& pattern : ignored_) {
    const bool glob = pattern.find_first_of("*?[") != std::string::npos;
    if (glob ? fnmatch(pattern.c_str(), name.c_str(), 0) == 0 : name.find(pattern) != std::string::npos)
      return true;
  }
  return false;
}

std::optional<ModuleSet::Target> ModuleSet::resolve(const std::string& tensor_name) {
  if (Parameter* d = find_dense(tensor_name)) return Target{.layer = nullptr, .dense = d, .param = {}, .shard = {}};
  const size_t dot = tensor_name.rfind('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  const std::string module = tensor_name.substr(0, dot);
  std::string param = tensor_name.substr(dot + 1);
  for (const StackedParam& s : stacked_) {
    if (module.size() <= s.part.size() || module.compare(module.size() - s.part.size(), s.part.size(), s.part) != 0)
      continue;
    const std::string fused = module.substr(0, module.size() - s.part.size()) + s.fused;
    if (LinearLayer* l = find_linear(fused)) return Target{.layer = l, .dense = nullptr, .param = param, .shard = s.shard};
  }
  if (LinearLayer* l = find_linear(module))
    return Target{.layer = l, .dense = nullptr, .param = param, .shard = ShardId::whole()};
  return std::nullopt;
}

}  // namespace qlm
