// The unquantized linear method: a dense [N_p, K_p] "weight" in the checkpoint's float dtype, run
// by a DenseLinearKernel. Used for models without quantization and for layers a format skips
// (ignore lists, lm_head); formats return it from get_linear_method for those layers.
#pragma once

#include <memory>

#include "quant/quantization_config.h"

namespace qlm {

// Registry name of the method for --linear-backend per-quant overrides.
inline constexpr const char* kUnquantizedName = "unquantized";

std::unique_ptr<LinearMethod> make_unquantized_linear_method();

}  // namespace qlm
