// Process-wide choices of `cuda_grouped` (kernels/cuda/moe_cuda.cc) for tests and measurements. Plain C++: the
// setters exist in every build.
#pragma once

#include <cstdint>

namespace qlm {

// The kernel of the grouped WNA16 expert GEMMs: Auto picks the tensor-core kernel where it can run (4-bit experts
// with groups of multiples of 32 rows, BF16 / F16 activations, compute capability >= 8.0) and the CUDA-core GEMV
// elsewhere. Environment: QLM_MOE_WNA16=gemv|mma, read once; set_moe_wna16_grouped overrides it (Auto: back to
// the environment or the rule). Forcing Mma where it cannot run leaves the GEMV.
enum class MoeWna16Grouped { Auto, Gemv, Mma };
void set_moe_wna16_grouped(MoeWna16Grouped kernel);
MoeWna16Grouped moe_wna16_grouped();

// Routed rows per expert (on average) up to which the tensor-core kernel runs grouped; above, the experts run one
// by one (dequantize + cuBLAS). 0: the default (kMoeMmaGroupedRowsPerExpert); environment QLM_MOE_MMA_MAX_ROWS.
void set_moe_mma_max_rows(int64_t rows);
int64_t moe_mma_max_rows();

// Whether the tensor-core grouped kernel's w2 GEMM writes the layer's output itself (the combine folded into it:
// MoeCombineFold in moe_wna16_kernels.h) for up to kMoeFoldMaxTokens tokens, instead of a combine kernel after it.
// Off by default (prepared in session 42, not yet measured); environment QLM_MOE_FOLD_COMBINE=1, read once;
// set_moe_fold_combine(1 / 0) overrides it, -1 back to the environment.
inline constexpr int64_t kMoeFoldMaxTokens = 32;
void set_moe_fold_combine(int on);
bool moe_fold_combine();

}  // namespace qlm
