// Fused mixture-of-experts kernels (FORMATS.md §8). A kernel gets the routing of one batch (every
// token's top-k experts and weights, grouped by expert) and the experts of this rank, and writes the
// weighted sum of the experts' SiLU-gated MLPs per token: the partial output of this tensor-parallel
// rank (w2 is row-parallel over the intermediate size; the caller reduces).
//
// Kernels register per device in MoEKernelRegistry like the linear kernels. The CPU kernel
// ("cpu_grouped", kernels/cpu/moe_grouped.cc) runs one pass per expert over its token group with the
// expert's own prepared linear kernels (any format). The CUDA kernel ("cuda_grouped",
// kernels/cuda/moe_cuda.cc) routes and groups on the device (run_device) and runs WNA16 experts
// from one copy of their weights it repacks itself (one grouped launch per projection, or per expert
// for many rows), every other format per expert on the experts' own CUDA linear kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"
#include "quant/wna16_weights.h"

namespace qlm {

// Which experts every token uses, and the same grouped by expert (a counting sort, stable in token
// order): slots of expert e are sorted_slots[expert_offsets[e] .. expert_offsets[e + 1]), a slot
// being token * top_k + j.
struct MoERouting {
  int64_t tokens = 0, top_k = 0, num_experts = 0;
  std::vector<int32_t> topk_ids;        // [tokens * top_k], expert of each slot
  std::vector<float> topk_weights;      // [tokens * top_k], routing weight of each slot
  std::vector<int64_t> expert_offsets;  // [num_experts + 1]
  std::vector<int32_t> sorted_slots;    // [tokens * top_k]
  int64_t tokens_of(int64_t expert) const { return expert_offsets[expert + 1] - expert_offsets[expert]; }
};

// Softmax over the router logits [T, E] (F32 host), top-k (ties: the lower expert id first), and
// with `renormalize` the k weights divided by their sum (Mixtral, Qwen3-MoE norm_topk_prob).
MoERouting select_experts(const Tensor& router_logits, int64_t top_k, bool renormalize);
// Routing from explicit ids and weights (tests, other routers); fills the grouped view.
MoERouting make_routing(int64_t tokens, int64_t top_k, int64_t num_experts, std::vector<int32_t> ids,
                        std::vector<float> weights);

struct MoEKernelConfig {
  int64_t num_experts = 0;    // global
  int64_t local_experts = 0;  // held by this rank (all of them under tensor parallelism)
  int64_t top_k = 0;
  int64_t hidden_size = 0;                 // H
  int64_t intermediate_size = 0;           // I (full)
  int64_t intermediate_per_partition = 0;  // I_p
  std::string format;                      // "gptq", "fp8", "unquantized", ...
  std::string w13_scheme, w2_scheme;       // the experts' linear methods (describe()), "mixed" when they differ
  bool uniform_experts = true;             // every expert has the same w13 scheme and the same w2 scheme
  bool renormalize = false;                // the router divides the top-k weights by their sum (run_device)
  DType act_dtype = DType::F32;
  Device device;
  int capability = 0;
  std::string describe() const;
};

// One expert as a kernel may run it: its two projections, already in their kernels' layouts.
struct MoEExpertOps {
  int64_t id = 0;                            // global expert id
  std::function<Tensor(const Tensor&)> w13;  // x [n, H] -> gate | up [n, 2·I_p]
  std::function<Tensor(const Tensor&)> w2;   // a [n, I_p] -> partial [n, H]
  // The projections' WNA16 standard form (this rank's slice), when their method is weight-only
  // integer and the MoE method kept it for the kernel; null otherwise. Valid during prepare() only.
  const WNA16Weights* w13_wna16 = nullptr;
  const WNA16Weights* w2_wna16 = nullptr;
};

class MoEKernel {
 public:
  virtual ~MoEKernel() = default;
  virtual std::string name() const = 0;
  // True when the kernel runs weight-only integer experts at every batch size from their standard
  // form alone (MoEExpertOps::w13_wna16 / w2_wna16) and never calls their w13 / w2: the MoE method
  // then builds no linear kernel for those projections, so the expert weights are held once.
  virtual bool runs_wna16_experts() const { return false; }
  // Called once every expert's weights are loaded and prepared; `experts` ordered by local index.
  virtual void prepare(std::vector<MoEExpertOps> experts) = 0;
  // y [T, H] (zero-filled F32 on the host, allocated by the caller) += Σ_j w[t, j] · expert_j(x[t]).
  // Experts that receive no token are not touched.
  virtual void run(const Tensor& x, const MoERouting& routing, Tensor& y) const = 0;
  // Device kernels: x [T, H] in the act dtype and router_logits [T, E] (F32, F16 or BF16) on the
  // kernel's device; returns this rank's partial output F32 [T, H] on the device, routed with
  // top_k and renormalize of the config. Host kernels refuse (kernel.device).
  virtual Tensor run_device(const Tensor& x, const Tensor& router_logits) const;
  // Why run_device_router does not take `tokens` tokens (the kernel multiplies the router itself inside its
  // routing), in words for the user; empty when it does.
  virtual std::string router_fold_obstacle(int64_t tokens) const;
  bool routes_from_weight(int64_t tokens) const { return router_fold_obstacle(tokens).empty(); }
  // run_device with the router's weight [E, H] (the act dtype, on the kernel's device) instead of its logits: the
  // logits x · weightᵀ (F32 sums rounded to the act dtype, as the router's linear layer rounds them) never leave the
  // routing. Only where routes_from_weight(T); refused otherwise (kernel.device).
  virtual Tensor run_device_router(const Tensor& x, const Tensor& router_weight) const;
  // Why run_device on `tokens` tokens waits for the host (e.g. reads the expert counts there), which
  // keeps it out of a captured CUDA graph; empty when it only enqueues device work. Default: it waits.
  virtual std::string device_host_wait(int64_t tokens) const;
  // How the experts run for `tokens` tokens, in words (bench-moe's "path"), e.g. "grouped WNA16, tensor cores
  // (8-row tiles)"; empty where the kernel has one way.
  virtual std::string experts_path(int64_t tokens) const { return {}; }
};

using MoEKernelRegistry = KernelRegistry<MoEKernelConfig, MoEKernel>;
using MoEKernelRegistrar = KernelRegistrar<MoEKernelConfig, MoEKernel>;

}  // namespace qlm
