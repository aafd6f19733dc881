#ifdef QLM_WITH_CUDA
#include "kernels/cuda/fp8_lt_gemm.h"

#include <vector>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "cuda/data_type.h"
#include "kernels/cuda/scaled_mm_epilogue.h"

namespace qlm {
namespace {

cuda::EpilogueArgs epilogue_args(const ScaledMMConfig& c, int64_t M, Tensor& y, const Tensor* bias) {
  cuda::EpilogueArgs e;
  e.y = y.raw_data();
  e.y_type = cuda_float_type(c.act_dtype);
  e.M = M;
  e.N = c.N_p;
  e.bias = bias ? bias->data<float>() : nullptr;
  return e;
}

}  // namespace

cuda::LtGemmSpec fp8_lt_spec(const ScaledMMConfig& c, const std::string& what) {
  cuda::LtGemmSpec spec;
  spec.a_type = spec.b_type = CUDA_R_8F_E4M3;
  spec.d_type = cuda::data_type_of(c.act_dtype);
  spec.compute = CUBLAS_COMPUTE_32F;
  spec.N = c.N_p;
  spec.K = c.K_p;
  spec.what = what;
  return spec;
}

void run_lt_gemm_with_bias(const cuda::LtGemm& gemm, const ScaledMMConfig& c, const CudaScaledMMWeights& w,
                           const CudaActCodes& q, int64_t M, Tensor& y, const Tensor* bias, const float* a_scale,
                           const float* b_scale) {
  const float* b = bias ? bias->data<float>() : nullptr;
  if (gemm.run(w.codes.raw_data(), q.codes.raw_data(), y.raw_data(), M, b, a_scale, b_scale) || !b) return;
  cuda::EpilogueArgs e = epilogue_args(c, M, y, bias);
  e.acc = y.raw_data();  // bias only, in place
  e.acc_type = e.y_type;
  QLM_CUDA_CHECK(cuda::launch_epilogue(e, cuda::context(c.device.index).stream));
}

Fp8OuterVecLtGemm::Fp8OuterVecLtGemm(const ScaledMMConfig& c, const ScaledMMWeights& host, const CudaScaledMMWeights& w,
                                     bool outer_vec, const std::string& what)
    : c_(c), row_scales_(weight_row_scales(c, host, w)) {
  cuda::LtGemmSpec spec = fp8_lt_spec(c, what);
  if (outer_vec) {
    spec.outer_vec_scales = true;
    gemm_ = std::make_unique<cuda::LtGemm>(c.device.index, spec);
    spec.outer_vec_scales = false;
  }
  spec.d_type = CUDA_R_32F;
  spec.what = what + " (F32 output)";
  gemm_f32_ = std::make_unique<cuda::LtGemm>(c.device.index, spec);
}

void Fp8OuterVecLtGemm::run(const CudaScaledMMWeights& w, const CudaActCodes& q, int64_t M, Tensor& y,
                            const Tensor* bias) const {
  const float* a_scale = row_scales_.data<float>();
  const float* b_scale = q.scales.data<float>();
  if (gemm_ && gemm_->supported(M, bias ? bias->data<float>() : nullptr, a_scale, b_scale)) {
    run_lt_gemm_with_bias(*gemm_, c_, w, q, M, y, bias, a_scale, b_scale);
    return;
  }
  Tensor acc = Tensor::empty({M, c_.N_p}, DType::F32, c_.device);
  gemm_f32_->run(w.codes.raw_data(), q.codes.raw_data(), acc.raw_data(), M, nullptr, nullptr, nullptr);
  cuda::EpilogueArgs e = epilogue_args(c_, M, y, bias);
  e.acc = acc.raw_data();
  e.acc_type = cuda::kAccF32;
  e.row_scale = q.scales.data<float>();
  e.row_scale_stride = 1;
  e.col_scale = w.scales.data<float>();
  e.col_scale_stride = c_.weight_scale == WeightScaleKind::Channel ? 1 : 0;
  QLM_CUDA_CHECK(cuda::launch_epilogue(e, cuda::context(c_.device.index).stream));
}

}  // namespace qlm
#endif
