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

}  // namespace qlm
