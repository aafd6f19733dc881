#include "kernels/cuda/wna16_device.h"

#ifdef QLM_WITH_CUDA
#include <algorithm>
#include <utility>

#include "cuda/context.h"
#include "cuda/cublas_check.h"
#include "cuda/cuda_check.h"
#include "cuda/data_type.h"

namespace qlm {
namespace {

// Split-K for the GEMV: about 4 blocks of kGemvWarps warps per SM over all column tiles, every
// warp at least 2 chunks; returns {splits, chunks per warp} with no empty trailing split.
std::pair<int, int64_t> plan_gemv(const cuda::Wna16DeviceWeights& w, int sm_count) {
  const int64_t tiles = (w.N_pad + cuda::kGemvColumns - 1) / cuda::kGemvColumns;
  const int64_t target_blocks = std::max(1, sm_count) * int64_t{4};
  const int64_t max_splits = std::max<int64_t>(1, w.chunks / (cuda::kGemvWarps * 2));
  int64_t splits = std::clamp<int64_t>((target_blocks + tiles - 1) / tiles, 1, std::min<int64_t>(max_splits, 65535));
  const int64_t cpw = (w.chunks + splits * cuda::kGemvWarps - 1) / (splits * cuda::kGemvWarps);
  splits = (w.chunks + cpw * cuda::kGemvWarps - 1) / (cpw * cuda::kGemvWarps);
  return {static_cast<int>(splits), cpw};
}

}  // namespace

cuda::Wna16Act wna16_act(DType d) {
  return d == DType::F16 ? cuda::Wna16Act::F16 : d == DType::BF16 ? cuda::Wna16Act::BF16 : cuda::Wna16Act::F32;
}

Wna16DeviceLayout upload_wna16_layout(const CudaWna16Layout& L, Device device) {
  Wna16DeviceLayout d;
  d.codes = Tensor::from_vector(L.codes, {static_cast<int64_t>(L.codes.size())}).to_device(device);
  d.scales = Tensor::from_vector(L.scales, {L.groups, L.N_pad}).to_device(device);
  if (!L.zeros.empty()) d.zeros = Tensor::from_vector(L.zeros, {L.groups, L.N_pad}).to_device(device);
  d.row_source = Tensor::from_vector(L.row_source, {L.rows}).to_device(device);
  d.chunk_group = Tensor::from_vector(L.chunk_group, {L.chunks}).to_device(device);
  cuda::Wna16DeviceWeights& w = d.view;
  w.codes = d.codes.data<uint32_t>();
  w.scales = d.scales.data<float>();
  w.zeros = d.zeros.defined() ? d.zeros.data<uint8_t>() : nullptr;
  w.row_source = d.row_source.data<int32_t>();
  w.chunk_group = d.chunk_group.data<int32_t>();
  w.bits = L.bits;
  w.implied_zero = L.implied_zero;
  w.K = L.K;
  w.N = L.N;
  w.N_pad = L.N_pad;
  w.rows = L.rows;
  w.chunks = L.chunks;
  return d;
}

void run_wna16_linear(const cuda::Wna16DeviceWeights& w, DType act_dtype, const Tensor& x, Tensor& y,
                      const float* bias, Device device) {
  const int64_t M = x.size(0);
  cuda::Context& ctx = cuda::context(device.index);
  const cuda::Wna16Act act = wna16_act(act_dtype);
  if (M <= cuda::kGemvMaxM) {
    Tensor xf = Tensor::empty({M, w.rows}, DType::F32, device);
    QLM_CUDA_CHECK(cuda::launch_wna16_gather_x(x.raw_data(), act, M, w, xf.data<float>(), ctx.stream));
    const auto [splits, cpw] = plan_gemv(w, ctx.sm_count);
    Tensor partial = Tensor::empty({splits, M, w.N}, DType::F32, device);
    QLM_CUDA_CHECK(
        cuda::launch_wna16_gemv(w, xf.data<float>(), static_cast<int>(M), splits, cpw, partial.data<float>(), ctx.stream));
    QLM_CUDA_CHECK(cuda::launch_wna16_reduce(partial.data<float>(), splits, M, w.N, bias, y.raw_data(), act, ctx.stream));
    return;
  }
  // Dequantized weights [K, N_pad] row-major = column-major N_pad x K: y^T = W^T x^T in cuBLAS terms.
  Tensor wd = Tensor::empty({w.K, w.N_pad}, act_dtype, device);
  QLM_CUDA_CHECK(cuda::launch_wna16_dequant(w, wd.raw_data(), act, ctx.stream));
  if (bias) QLM_CUDA_CHECK(cuda::launch_wna16_bias_rows(bias, M, w.N, y.raw_data(), act, ctx.stream));
  const float alpha = 1.0f, beta = bias ? 1.0f : 0.0f;
  const cudaDataType_t type = cuda::data_type_of(act_dtype);
  const cublasComputeType_t compute = act_dtype == DType::F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  QLM_CUBLAS_CHECK(cublasSetPointerMode(ctx.cublas, CUBLAS_POINTER_MODE_HOST));
  QLM_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(w.N), static_cast<int>(M),
                                static_cast<int>(w.K), &alpha, wd.raw_data(), type, static_cast<int>(w.N_pad),
                                x.raw_data(), type, static_cast<int>(w.K), &beta, y.raw_data(), type,
                                static_cast<int>(w.N), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace qlm
#endif
