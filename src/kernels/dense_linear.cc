#include "kernels/dense_linear.h"

#include <fmt/format.h>

namespace qlm {

std::string DenseLinearConfig::describe() const {
  return fmt::format("weight={} K_p={} N_p={} act={}", dtype_name(weight_dtype), K_p, N_p, dtype_name(act_dtype));
}

}  // namespace qlm
