#include "kernels/moe_kernel.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qlm {

std::string MoEKernelConfig::describe() const {
  return fmt::format("{} experts ({} local) top-{} H={} I={} I_p={} {}: w13 [{}] w2 [{}]{} act={} on {}", num_experts,
                     local_experts, top_k, hidden_size, intermediate_size, intermediate_per_partition, format,
                     w13_scheme, w2_scheme, uniform_experts ? "" : " (experts differ)", dtype_name(act_dtype),
                     device.str());
}

Tensor MoEKernel::run_device(const Tensor& x, const Tensor&) const {
  fail("kernel.device", {}, "run this MoE layer on the device its kernel was built for",
       "fused-MoE kernel {} has no device path (input on {})", name(), x.device().str());
}

std::string MoEKernel::router_fold_obstacle(int64_t) const {
  return fmt::format("fused-MoE kernel {} does not compute the router", name());
}

Tensor MoEKernel::run_device_router(const Tensor& x, const Tensor&) const {
  fail("kernel.device", {}, "pass the router's logits (run_device)",
       "fused-MoE kernel {} does not route from the router's weight at {} tokens", name(), x.size(0));
}

std::string MoEKernel::device_host_wait(int64_t) const {
  return fmt::format("fused-MoE kernel {} does not say that its device path avoids host waits", name());
}

MoERouting make_routing(int64_t tokens, int64_t top_k, int64_t num_experts, std::vector<int32_t> ids,
                        std::vector<float> weights) {
  QLM_CHECK(tokens >= 0 && top_k > 0 && num_experts > 0);
  QLM_CHECK(static_cast<int64_t>(ids.size()) == tokens * top_k && ids.size() == weights.size());
  MoERouting r;
  r.tokens = tokens;
  r.top_k = top_k;
  r.num_experts = num_experts;
  r.topk_ids = std::move(ids);
  r.topk_weights = std::move(weights);
  r.expert_offsets.assign(static_cast<size_t>(num_experts + 1), 0);
  for (int32_t e : r.topk_ids) {
    QLM_CHECK(e >= 0 && e < num_experts);
    ++r.expert_offsets[static_cast<size_t>(e) + 1];
  }
  for (int64_t e = 0; e < num_experts; ++e) r.expert_offsets[e + 1] += r.expert_offsets[e];
  std::vector<int64_t> next(r.expert_offsets.begin(), r.expert_offsets.end() - 1);
  r.sorted_slots.resize(r.topk_ids.size());
  for (size_t slot = 0; slot < r.topk_ids.size(); ++slot)
    r.sorted_slots[static_cast<size_t>(next[static_cast<size_t>(r.topk_ids[slot])]++)] = static_cast<int32_t>(slot);
  return r;
}

MoERouting select_experts(const Tensor& router_logits, int64_t top_k, bool renormalize) {
  QLM_CHECK(router_logits.dim() == 2 && router_logits.dtype() == DType::F32 && router_logits.on_host());
  const Tensor logits = router_logits.contiguous();
  const int64_t T = logits.size(0), E = logits.size(1);
  if (top_k < 1 || top_k > E)
    fail("moe.top_k", {}, "set num_experts_per_tok to at most num_experts", "top-k {} with {} experts", top_k, E);
  const float* l = logits.data<float>();
  std::vector<int32_t> ids(static_cast<size_t>(T * top_k));
  std::vector<float> weights(ids.size());
  std::vector<double> p(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = l + t * E;
    double m = row[0];
    for (int64_t e = 1; e < E; ++e) m = std::max(m, static_cast<double>(row[e]));
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<double>(row[e]) - m);
    for (int64_t e = 0; e < E; ++e) order[e] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return p[a] != p[b] ? p[a] > p[b] : a < b;
    });
    double chosen = 0;
    for (int64_t j = 0; j < top_k; ++j) chosen += p[order[j]] / sum;
    for (int64_t j = 0; j < top_k; ++j) {
      const double w = p[order[j]] / sum;
      ids[t * top_k + j] = order[j];
      weights[t * top_k + j] = static_cast<float>(renormalize ? w / chosen : w);
    }
  }
  return make_routing(T, top_k, E, std::move(ids), std::move(weights));
}

}  // namespace qlm
