// One CUTLASS sm_90a FP8 GEMM configuration (see kernels/cuda/fp8_cutlass_gemm.h). Each
// fp8_cutlass_<config>.cu instantiates Fp8Gemm once, so the (slow) CUTLASS instantiations compile
// in parallel and a change to one does not rebuild the others.
//
// Layouts: x [M, K] and w [N, K] are both K-major, which FP8 wgmma needs for both operands.
//   plain:   A = x (M x K, row-major), B = w (K x N, column-major), D = y (M x N, row-major);
//            sx is a column broadcast (one per row of D), sw and bias row broadcasts.
//   swapped: A = w, B = x, D = y^T (N x M, column-major: the same bytes as y row-major);
//            sw and bias are column broadcasts, sx a row broadcast.
// Epilogue (EVT): D = fma(s_token, s_weight * acc, bias) in F32, rounded once to the output type.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>

#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "kernels/cuda/fp8_cutlass_gemm.h"

namespace qlm::cuda::fp8_cutlass {

using namespace cute;
namespace fusion = cutlass::epilogue::fusion;

template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule, bool Swap,
          class ElementOut, class TileScheduler = void>
struct Fp8Gemm {
  using ElementIn = cutlass::float_e4m3_t;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = std::conditional_t<Swap, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int kAlignIn = 16;
  static constexpr int kAlignOut = 16 / sizeof(ElementOut);

  // Vectors along D's rows (one value per row) and along its columns.
  using PerRow = fusion::Sm90ColBroadcast<0, TileShape, float, float, Stride<_1, _0, int64_t>>;
  using PerCol = fusion::Sm90RowBroadcast<0, TileShape, float, float, Stride<_0, _1, int64_t>>;
  using TokenScale = std::conditional_t<Swap, PerCol, PerRow>;
  using WeightVec = std::conditional_t<Swap, PerRow, PerCol>;  // weight scale and bias

  using Mul = fusion::Sm90Compute<cutlass::multiplies, float, float, cutlass::FloatRoundStyle::round_to_nearest>;
  using Fma = fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementOut, float,
                                  cutlass::FloatRoundStyle::round_to_nearest>;
  using ScaledAcc = fusion::Sm90EVT<Mul, WeightVec, fusion::Sm90AccFetch>;
  using Epilogue = fusion::Sm90EVT<Fma, TokenScale, ScaledAcc, WeightVec>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignOut, ElementOut, LayoutD,
      kAlignOut, EpilogueSchedule, Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementIn, LayoutA, kAlignIn, ElementIn, LayoutB, kAlignIn,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
                                                      TileScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  using StrideD = typename Kernel::StrideD;

  static typename Gemm::Arguments arguments(const Fp8CutlassArgs& a) {
    const int m = static_cast<int>(Swap ? a.N : a.M);
    const int n = static_cast<int>(Swap ? a.M : a.N);
    const int k = static_cast<int>(a.K);
    const auto* w = static_cast<const ElementIn*>(a.w);
    const auto* x = static_cast<const ElementIn*>(a.x);
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {m, n, k, 1};
    args.mainloop.ptr_A = Swap ? w : x;
    args.mainloop.dA = cutlass::make_cute_packed_stride(StrideA{}, make_shape(m, k, 1));
    args.mainloop.ptr_B = Swap ? x : w;
    args.mainloop.dB = cutlass::make_cute_packed_stride(StrideB{}, make_shape(n, k, 1));
    args.mainloop.mma_promotion_interval = static_cast<uint32_t>(a.promotion_interval);
    args.epilogue.ptr_C = nullptr;
    args.epilogue.ptr_D = static_cast<ElementOut*>(a.y);
    args.epilogue.dD = cutlass::make_cute_packed_stride(StrideD{}, make_shape(m, n, 1));
    auto& t = args.epilogue.thread;  // {token scale, {weight scale, acc, mul}, bias, fma}
    typename TokenScale::Arguments token{a.sx, 0.0f, {}};
    typename WeightVec::Arguments weight{a.sw, 0.0f, {}};
    typename WeightVec::Arguments bias{a.bias, 0.0f, {}};
    t = {token, {weight, {}, {}}, bias, {}};
    args.hw_info.device_id = a.device;
    args.hw_info.sm_count = a.sm_count;
    return args;
  }

  static cudaError_t run(const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    typename Gemm::Arguments args = arguments(a);
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
    if (Gemm::get_workspace_size(args) > workspace_bytes) return cudaErrorInvalidValue;
    if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
    if (gemm.run(stream, nullptr, a.pdl) != cutlass::Status::kSuccess) {
      const cudaError_t e = cudaGetLastError();
      return e == cudaSuccess ? cudaErrorLaunchFailure : e;
    }
    return cudaGetLastError();
  }
};

// The entry points each configuration's .cu file defines.
#define QLM_FP8_CUTLASS_DECLARE(tag) \
  cudaError_t run_##tag(const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t s);

QLM_FP8_CUTLASS_DECLARE(swap128x32)
QLM_FP8_CUTLASS_DECLARE(swap128x64)
QLM_FP8_CUTLASS_DECLARE(swap64x128c12)
QLM_FP8_CUTLASS_DECLARE(swap128x128c12)

// Defines run_<tag> for one Fp8Gemm type, for BF16 and F16 outputs.
#define QLM_FP8_CUTLASS_DEFINE(tag, ...)                                                                    \
  template <class Out>                                                                                      \
  using Gemm_##tag = Fp8Gemm<__VA_ARGS__>;                                                                  \
  cudaError_t run_##tag(const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t s) { \
    return a.y_f16 ? Gemm_##tag<cutlass::half_t>::run(a, workspace, workspace_bytes, s)                     \
                   : Gemm_##tag<cutlass::bfloat16_t>::run(a, workspace, workspace_bytes, s);                \
  }

}  // namespace qlm::cuda::fp8_cutlass
