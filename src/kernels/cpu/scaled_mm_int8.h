// The cpu_fast INT8 W8A8 kernels: weights repacked into column panels in each ISA's own layout,
// activations quantized to int8 once per call, exact int32 accumulation, and a fused epilogue
//   y[m, n] = float(acc[m, n] - zp[m] * colsum[n]) * row_scale[m] * col_scale[n] + bias[n].
// The int32 accumulation is exact while K_pad * 255 * 128 < 2^31 (K_pad <= 65536), which
// can_implement enforces.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/aligned_buffer.h"

namespace qlm {

inline constexpr int64_t kInt8MaxK = 65536;

struct Int8Packed {
  int64_t K = 0, N = 0;          // logical
  int64_t K_pad = 0, N_pad = 0;  // K_pad: multiple of the ISA's k step; N_pad: of the panel width
  int64_t panel = 0;             // columns per panel
  AlignedBuffer<int8_t> w;       // panels, layout per ISA
  std::vector<int32_t> colsum;   // [N_pad] sum over k of the codes of column n
  std::vector<float> col_scale;  // [N_pad] weight scale of column n (per-tensor broadcast)
  size_t bytes() const { return w.bytes() + colsum.size() * 4 + col_scale.size() * 4; }
};

struct Int8Epilogue {
  const float* row_scale = nullptr;  // [M]
  const int32_t* row_zp = nullptr;   // [M], activation zero points (zeros when symmetric)
  const float* bias = nullptr;       // [N_pad] or null
  float* y = nullptr;                // [M, N] row-major
  int64_t N = 0;
};

struct Int8ScaledOps {
  const char* isa;
  int64_t k_step;  // K_pad is a multiple of this
  int64_t panel;   // panel width in columns
  // codes [N, K] row-major -> p.w (p.K, p.N, p.K_pad, p.N_pad, p.panel already set).
  void (*pack)(const int8_t* codes, Int8Packed& p);
  // Output rows [m0, m1) x panels [p0, p1). xq: int8 codes [M, ldx] with zeros in [K, K_pad).
  // acc: scratch of at least acc_scratch_ints() int32 per call.
  void (*gemm)(const Int8Packed& p, const int8_t* xq, int64_t ldx, int64_t m0, int64_t m1, int64_t p0, int64_t p1,
               const Int8Epilogue& e, int32_t* scratch);
  // Activation layout conversion the ISA needs after quantization (AVX2 widens to int16), or null.
  int64_t scratch_ints;  // int32 scratch per gemm call
};

const Int8ScaledOps* int8_scaled_avx512_vnni_ops();  // null when not compiled
const Int8ScaledOps* int8_scaled_avx2_ops();

}  // namespace qlm
