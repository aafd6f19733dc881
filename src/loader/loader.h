// The default loader: streams every checkpoint tensor into the model's parameters (TP slicing
// happens in the parameters), then checks both directions of completeness (RELIABILITY.md T7)
// before the remaining layers are finalized: every checkpoint tensor consumed or explicitly ignored
// ("loader.unconsumed"), every declared parameter fully written ("loader.incomplete"). Layers of
// online-quantizing methods, and of loads that release checkpoint-layout tensors
// (QuantContext::release_checkpoint_tensors), are finalized as soon as all their parameters are
// written, so that only a layer's worth of checkpoint-layout tensors is held at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "loader/module_set.h"

namespace qlm {

struct LoadProgress {
  size_t tensors_done = 0, tensors_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;
  std::string_view tensor;  // the tensor just handled
};
using ProgressCallback = std::function<void(const LoadProgress&)>;

struct LoadReport {
  size_t tensors_total = 0;        // tensors in the checkpoint
  size_t tensors_loaded = 0;       // written into a parameter
  size_t tensors_ignored = 0;      // matched an ignore pattern
  size_t zero_biases_skipped = 0;  // all-zero biases of layers declared without bias (GPTQ exports)
  size_t layers_finalized = 0;
  size_t dense_tensors = 0;
  uint64_t bytes_loaded = 0;       // checkpoint bytes of the loaded tensors
  double load_seconds = 0, finalize_seconds = 0, seconds = 0;
  std::vector<std::string> warnings;
  std::string summary() const;  // one line for logs
};

// Loads every tensor of `checkpoint` into `modules`, checks completeness, then finalizes every
// layer (process_weights_after_loading). Errors name the file, tensor and layer.
LoadReport load_checkpoint(const io::Checkpoint& checkpoint, ModuleSet& modules, const ProgressCallback& progress = {});
// The same from in-memory tensors (tests, converters); `source` names them in errors.
LoadReport load_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, ModuleSet& modules,
                        const ProgressCallback& progress = {}, const std::string& source = "<memory>");

}  // namespace qlm
