// MoEBlock on a CUDA device: the router's logits stay on the device (at decode they are computed inside the
// routing kernel), FusedMoE routes and runs the experts there (kernels/cuda/moe_cuda.cc), and Qwen2-MoE's shared
// expert is added with its sigmoid gate before the one tensor-parallel reduction. The output is F32 (the residual
// stream's dtype).
#include "models/moe_block.h"

#ifdef QLM_WITH_CUDA
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/cuda/moe_ops.h"
#endif

namespace qlm::models {

#ifdef QLM_WITH_CUDA

Tensor MoEBlock::forward_device(const Tensor& h) {
  // At decode the MoE kernel multiplies the router itself inside its routing (one launch instead of the router's
  // GEMM and the routing): router_fold_obstacle says where it cannot.
  const bool fused_router = h.is_contiguous() && router_fold_obstacle(h.size(0)).empty();
  Tensor y = fused_router ? experts_->forward_router_weight(h, *router_->dense_device_weight())
                          : experts_->forward(h, router_->forward(h));
  if (!shared_gate_up_) return y;
  const Tensor shared = shared_down_->forward(ops::cu::silu_and_mul(shared_gate_up_->forward(h)));
  ops::cu::add_sigmoid_gated(y, shared, shared_gate_->forward(h));
  if (tp_.size > 1) tp_.comm->all_reduce_sum(y);
  return y;
}

#else

Tensor MoEBlock::forward_device(const Tensor& h) {
  fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed, or use --device cpu",
       "{} needs the CUDA backend, which this qlm was built without", h.device().str());
}

#endif

}  // namespace qlm::models
