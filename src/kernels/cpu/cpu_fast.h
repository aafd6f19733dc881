// Entry points of the cpu_fast kernels, one set per instruction set. Each set is compiled in its own
// translation unit for its ISA; callers pick a set only after cpu_features() confirms the ISA.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/cpu/dense_layout.h"
#include "kernels/cpu/wna16_layout.h"

namespace qlm {

struct CpuFastOps {
  const char* isa;  // "avx512", "avx2"
  // y[M, N] = x[M, K] · W (+ bias). x, y row-major f32; y is fully written.
  void (*wna16)(const PackedWna16& w, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool);
  void (*dense)(const PackedDense& w, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool);
  // Sum of data[0, count) with full-width loads: the STREAM-like read kernel that measures the
  // memory bandwidth the weight streams are compared against.
  float (*read_sum)(const float* data, size_t count);
};

// nullptr when the ISA is not compiled in (non-x86 builds). Callers check cpu_features() first.
const CpuFastOps* cpu_fast_avx512_ops();
const CpuFastOps* cpu_fast_avx2_ops();

}  // namespace qlm
