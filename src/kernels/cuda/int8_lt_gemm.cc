// See int8_lt_gemm.h.
#ifdef QLM_WITH_CUDA
#include "kernels/cuda/int8_lt_gemm.h"

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/scaled_mm_epilogue.h"

namespace qlm {

Int8LtGemm::Int8LtGemm(const ScaledMMConfig& c, const std::string& what) : c_(c) {
  cuda::LtGemmSpec spec;
  spec.a_type = spec.b_type = CUDA_R_8I;
  spec.d_type = CUDA_R_32I;
  spec.compute = CUBLAS_COMPUTE_32I;
  spec.scale_type = CUDA_R_32I;
  spec.N = c_.N_p;
  spec.K = c_.K_p;
  spec.what = what;
  gemm_ = std::make_unique<cuda::LtGemm>(c_.device.index, spec);
}

void Int8LtGemm::run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y,
                     const Tensor* bias) const {
  cuda::Context& ctx = cuda::context(c_.device.index);
  Tensor acc = Tensor::empty({M, c_.N_p}, DType::I32, c_.device);
  gemm_->run(w.codes.raw_data(), q.codes.raw_data(), acc.raw_data(), M, nullptr, nullptr, nullptr);
  cuda::EpilogueArgs e;
  e.acc = acc.raw_data();
  e.acc_type = cuda::kAccI32;
  e.y = y.raw_data();
  e.y_type = cuda_float_type(c_.act_dtype);
  e.M = M;
  e.N = c_.N_p;
  e.row_scale = q.scales.data<float>();
  e.row_scale_stride = 1;
  e.col_scale = w.scales.data<float>();
  e.col_scale_stride = c_.weight_scale == WeightScaleKind::Channel ? 1 : 0;
  if (!c_.act_symmetric) {
    e.row_zero = q.zeros.data<int32_t>();
    e.col_sum = w.col_sums.data<int32_t>();
  }
  e.bias = bias ? bias->data<float>() : nullptr;
  QLM_CUDA_CHECK(cuda::launch_epilogue(e, ctx.stream));
}

}  // namespace qlm
#endif
