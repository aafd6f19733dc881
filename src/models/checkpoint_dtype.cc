#include "models/checkpoint_dtype.h"

namespace qlm::models {

bool is_wide_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

DType linear_params_dtype(const TensorDtypeLookup& dtypes, const std::vector<std::string>& modules, DType fallback) {
  for (const std::string& module : modules)
    for (const char* suffix : {".weight", ".scales", ".weight_scale"})
      if (const auto d = dtypes(module + suffix); d && is_wide_float(*d)) return *d;
  return fallback;
}

}  // namespace qlm::models
