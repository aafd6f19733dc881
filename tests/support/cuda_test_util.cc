#include "tests/support/cuda_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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
  return num / std::max(den, 1e-30);
}

double normwise_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

Tensor nan_poisoned(int64_t M, int64_t N, DType act, Device device) {
  std::vector<float> nan(static_cast<size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
  return Tensor::from_vector(nan, {M, N}).to(act).to_device(device);
}

size_t run_wna16_against_cpu_ref(
    const std::string& kernel_name, const Wna16Spec& spec, const WNA16Weights& weights, DType act, Device device,
    int capability, const std::vector<int64_t>& Ms,
    const std::function<void(int64_t M, const std::vector<float>& got, const std::vector<float>& want)>& compare) {
  const MPLinearLayerConfig cfg = wna16_config(spec, act, device, capability);
  const auto* entry = MPKernelRegistry::instance().find(kernel_name);
  if (entry == nullptr) {
    ADD_FAILURE() << kernel_name << " is not registered";
    return 0;
  }
  if (auto why = entry->can_implement(cfg)) {
    ADD_FAILURE() << kernel_name << " cannot implement " << cfg.describe() << ": " << *why;
    return 0;
  }
  auto kernel = entry->create(cfg);
  kernel->prepare(weights);
  auto ref = MPKernelRegistry::instance().find("cpu_ref")->create(wna16_config(spec, DType::F32, Device::cpu(), 0));
  ref->prepare(weights);

  const int64_t K = spec.K, N = spec.N;
  const Tensor bias = Tensor::from_vector(random_floats(N, spec.seed + 99), {N});
  const Tensor bias_dev = bias.to_device(device);
  for (int64_t M : Ms) {
    SCOPED_TRACE(fmt::format("M={}", M));
    const bool with_bias = M % 2 == 1;
    const Tensor x_act =
        Tensor::from_vector(random_floats(static_cast<size_t>(M * K), spec.seed * 31 + M), {M, K}).to(act);
    Tensor y_ref = Tensor::empty({M, N}, DType::F32);
    ref->run(x_act.to(DType::F32), y_ref, with_bias ? &bias : nullptr);
    Tensor y = nan_poisoned(M, N, act, device);
    kernel->run(x_act.to_device(device), y, with_bias ? &bias_dev : nullptr);
    const std::vector<float> got = y.to_device(Device::cpu()).to_float_vector();
    const int64_t bad = first_non_finite(got.data(), M * N);
    if (bad != -1) {
      ADD_FAILURE() << "element " << bad << " (row " << bad / N << ", column " << bad % N
                    << ") not written or not finite";
      continue;
    }
    compare(M, got, y_ref.to_float_vector());
  }
  return kernel->weight_bytes();
}

}  // namespace qlm::testing
