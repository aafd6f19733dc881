// One CUTLASS sm_90a W8A8 GEMM configuration (see kernels/cuda/fp8_cutlass_gemm.h): FP8 e4m3 codes with FP32
// accumulation (promoted from the tensor core's accumulator every promotion_interval k-steps) or INT8 codes with
// exact int32 accumulation. Each fp8_cutlass_<config>.cu / int8_cutlass_<config>.cu instantiates W8A8Gemm once, so
// the (slow) CUTLASS instantiations compile in parallel and a change to one does not rebuild the others; the tile
// configurations themselves are defined once, below.
//
// Layouts: x [M, K] and w [N, K] are both K-major, which 8-bit wgmma needs for both operands.
//   plain:   A = x (M x K, row-major), B = w (K x N, column-major), D = y (M x N, row-major);
//            sx is a column broadcast (one per row of D), sw and bias row broadcasts.
//   swapped: A = w, B = x, D = y^T (N x M, column-major: the same bytes as y row-major);
//            sw and bias are column broadcasts, sx a row broadcast.
// Epilogue (EVT): D = fma(s_token, s_weight * acc, bias) in F32 (an int32 accumulator converted first), rounded once
// to the output type.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>

#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>
#include <type_traits>

#include "kernels/cuda/fp8_cutlass_gemm.h"

namespace qlm::cuda::fp8_cutlass {

using namespace cute;
namespace fusion = cutlass::epilogue::fusion;

// The tile configurations of Fp8CutlassConfig. All run the swapped problem y^T = w x^T.
// 128 weight rows x 32 tokens x 128 k, cooperative (each of the two consumer warpgroups takes 64 of the rows). Twice
// the CTAs of Swap128x64 for layers whose N/128 weight tiles alone do not fill the SMs.
struct Swap128x32 {
  using Tile = Shape<_128, _32, _128>;
  using Cluster = Shape<_1, _1, _1>;
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
// 128 weight rows x 64 tokens x 128 k, cooperative: both consumer warpgroups work on one tile, so a CTA that gets one
// tile keeps both busy (ping-pong left one idle there).
struct Swap128x64 {
  using Tile = Shape<_128, _64, _128>;
  using Cluster = Shape<_1, _1, _1>;
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
// 64 weight rows x 128 tokens x 128 k, one consumer warpgroup per tile (its 64 x 128 accumulators and, for FP8, their
// promotion copies fit in registers), clusters of 2 CTAs along the tokens sharing each weight tile through TMA
// multicast. For many tokens on layers whose 64-row tiles still fit in about one wave.
struct Swap64x128C12 {
  using Tile = Shape<_64, _128, _128>;
  using Cluster = Shape<_1, _2, _1>;
  using Kernel = cutlass::gemm::KernelTmaWarpSpecialized;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};
// 128 weight rows x 128 tokens x 128 k, cooperative, clusters of 2 CTAs along the tokens sharing each weight tile:
// torch's own FP8 choice beyond one wave of 64 x 128 tiles. FP8: not chosen by the rule (measured within 2 % of
// cuBLASLt either way; forced by QLM_FP8_CUTLASS_CONFIG=swap128x128c12 for that comparison, docs/fp8-kernel-notes.md).
// INT8: chosen wherever FP8's rule leaves M to cuBLASLt, whose INT8 GEMM took 1.1-2.2x its time there (session 50).
struct Swap128x128C12 {
  using Tile = Shape<_128, _128, _128>;
  using Cluster = Shape<_1, _2, _1>;
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};

// ElementIn: cutlass::float_e4m3_t or int8_t.
template <class ElementIn, class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule, bool Swap,
          class ElementOut, class TileScheduler = void>
struct W8A8Gemm {
  static constexpr bool kInt8 = std::is_same_v<ElementIn, int8_t>;
  static_assert(kInt8 || std::is_same_v<ElementIn, cutlass::float_e4m3_t>);
  using ElementAcc = std::conditional_t<kInt8, int32_t, float>;
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
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, float, void, LayoutD, kAlignOut, ElementOut, LayoutD,
      kAlignOut, EpilogueSchedule, Epilogue>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementIn, LayoutA, kAlignIn, ElementIn, LayoutB, kAlignIn,
      ElementAcc, TileShape, ClusterShape,
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
    if constexpr (!kInt8) args.mainloop.mma_promotion_interval = static_cast<uint32_t>(a.promotion_interval);
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

// The entry points each instance's .cu file defines: run_<codes>_<config> (codes fp8 or int8, config the struct).
#define QLM_W8A8_CUTLASS_DECLARE(codes, config) \
  cudaError_t run_##codes##_##config(const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t s);
#define QLM_W8A8_CUTLASS_DECLARE_BOTH(config) \
  QLM_W8A8_CUTLASS_DECLARE(fp8, config)       \
  QLM_W8A8_CUTLASS_DECLARE(int8, config)

QLM_W8A8_CUTLASS_DECLARE_BOTH(Swap128x32)
QLM_W8A8_CUTLASS_DECLARE_BOTH(Swap128x64)
QLM_W8A8_CUTLASS_DECLARE_BOTH(Swap64x128C12)
QLM_W8A8_CUTLASS_DECLARE_BOTH(Swap128x128C12)

// Defines run_<codes>_<config> for codes of type ElementIn on one configuration, BF16 and F16 outputs.
#define QLM_W8A8_CUTLASS_DEFINE(codes, ElementIn, config)                                                       \
  template <class Out>                                                                                          \
  using Gemm_##codes##_##config =                                                                               \
      W8A8Gemm<ElementIn, config::Tile, config::Cluster, config::Kernel, config::Epilogue, /*Swap=*/true, Out>; \
  cudaError_t run_##codes##_##config(const Fp8CutlassArgs& a, void* workspace, size_t workspace_bytes,          \
                                     cudaStream_t s) {                                                          \
    return a.y_f16 ? Gemm_##codes##_##config<cutlass::half_t>::run(a, workspace, workspace_bytes, s)            \
                   : Gemm_##codes##_##config<cutlass::bfloat16_t>::run(a, workspace, workspace_bytes, s);       \
  }

}  // namespace qlm::cuda::fp8_cutlass
