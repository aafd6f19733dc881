// Which float type a checkpoint stores a module's dense tensors in, so that a layer declares parameters the
// checkpoint can fill (a bf16 model's norms and unquantized layers, an fp16 one's GPTQ scales).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace qlm::models {

// The dtype of a tensor in the checkpoint by its full name; nullopt where it has none of that name.
using TensorDtypeLookup = std::function<std::optional<DType>(std::string_view name)>;

// F32, F16 or BF16: the types dense parameters are declared in.
bool is_wide_float(DType d);

// The dtype of the first of `modules` (module names, e.g. "model.layers.0.mlp.gate_proj") whose ".weight",
// ".scales" or ".weight_scale" tensor the checkpoint holds in a wide float type; `fallback` where none does.
DType linear_params_dtype(const TensorDtypeLookup& dtypes, const std::vector<std::string>& modules, DType fallback);

}  // namespace qlm::models
