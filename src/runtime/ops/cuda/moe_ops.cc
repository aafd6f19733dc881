#include "runtime/ops/cuda/moe_ops.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "runtime/ops/cuda/elem_type.h"
#include "runtime/ops/cuda/moe_launch.h"

namespace qlm::ops::cu {

void add_sigmoid_gated(Tensor& y, const Tensor& shared, const Tensor& gate) {
  QLM_CHECK(!y.on_host() && y.dtype() == DType::F32 && y.dim() == 2 && y.is_contiguous());
  QLM_CHECK(shared.shape() == y.shape() && shared.is_contiguous() && shared.device() == y.device());
  QLM_CHECK(gate.numel() == y.size(0) && gate.is_contiguous() && gate.device() == y.device());
  QLM_CUDA_CHECK(launch_moe_add_gated(y.data<float>(), shared.raw_data(), elem_type(shared.dtype()), gate.raw_data(),
                                      elem_type(gate.dtype()), y.size(0), y.size(1),
                                      qlm::cuda::context(y.device().index).stream));
}

}  // namespace qlm::ops::cu
#endif
