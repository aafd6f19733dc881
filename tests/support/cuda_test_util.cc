#include "tests/support/cuda_test_util.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace qlm::testing {

MPLinearLayerConfig wna16_config(const Wna16Spec& s, DType act, Device device, int capability) {
  MPLinearLayerConfig c;
  c.K = c.K_p = s.K;
  c.N = c.N_p = s.N;
  c.weight_type = PackedIntType{s.bits, s.zero_points ? 0 : 1 << (s.bits - 1)};
  c.zero_points = s.zero_points;
  c.has_g_idx = s.act_order;
  c.group_size = s.group_size;
  c.act_dtype = act;
  c.device = device;
  c.capability = capability;
  return c;
}

std::string wna16_spec_str(const Wna16Spec& s) {
  return fmt::format("bits={} K={} N={} group={} zp={} act_order={}", s.bits, s.K, s.N, s.group_size, s.zero_points,
                     s.act_order);
}

double mean_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += std::fabs(static_cast<double>(got[i]) - want[i]);
    den += std::fabs(static_cast<double>(want[i]));
  }
  return num / den;
}

Tensor nan_poisoned(int64_t M, int64_t N, DType act, Device device) {
  std::vector<float> nan(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
  return Tensor::from_vector(nan, {M, N}).to(act).to_device(device);
}

}  // namespace qlm::testing
