#include "kernels/mp_linear.h"

#include <fmt/format.h>

namespace qlm {

std::string MPLinearLayerConfig::describe() const {
  return fmt::format("{} K_p={} N_p={} group={} zp={} act_order={} act={}", weight_type.name(), K_p, N_p,
                     group_size, zero_points ? "yes" : "no", has_g_idx ? "yes" : "no", dtype_name(act_dtype));
}

}  // namespace qlm
