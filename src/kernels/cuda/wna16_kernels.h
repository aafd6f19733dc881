// Device kernels of `cuda_wna16` (plain launchers; see wna16_layout.h for the weight layout).
// Every launcher enqueues on `stream` and returns the launch status.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

enum class Wna16Act : int { F32, F16, BF16 };

// Device pointers and shape of one prepared layer (CudaWna16Layout on the device).
struct Wna16DeviceWeights {
  const uint32_t* codes = nullptr;       // [chunks * chunk_words, N_pad]
  const float* scales = nullptr;         // [groups, N_pad]
  const uint8_t* zeros = nullptr;        // [groups, N_pad], or null: implied_zero everywhere
  const int32_t* row_source = nullptr;   // [rows]
  const int32_t* chunk_group = nullptr;  // [chunks]
  int bits = 4;
  int implied_zero = 0;
  int64_t K = 0, N = 0, N_pad = 0, rows = 0, chunks = 0;
};

// GEMV blocks: kGemvWarps warps over the same 128 columns (4 per lane), each warp a contiguous
// range of chunks; one partial sum per block and K split.
constexpr int kGemvWarps = 8;
constexpr int kGemvColumns = 128;
constexpr int kGemvMaxM = 8;

// xf[m, j] = x[m, row_source[j]] as f32 (0 for padding rows). x: [M, K] in `act`, xf: [M, rows].
cudaError_t launch_wna16_gather_x(const void* x, Wna16Act act, int64_t M, const Wna16DeviceWeights& w, float* xf,
                                  cudaStream_t stream);
// partial[split, m, n] = sum over the split's chunks of xf[m, j] * W[j, n], for M in [1, kGemvMaxM].
// Grid: ceil(N_pad / kGemvColumns) x splits; split s covers chunks [s*kGemvWarps*cpw, (s+1)*kGemvWarps*cpw).
cudaError_t launch_wna16_gemv(const Wna16DeviceWeights& w, const float* xf, int M, int splits,
                              int64_t chunks_per_warp, float* partial, cudaStream_t stream);
// y[m, n] = sum_s partial[s, m, n] (+ bias[n]), converted to `act`. y: [M, N] contiguous.
cudaError_t launch_wna16_reduce(const float* partial, int splits, int64_t M, int64_t N, const float* bias, void* y,
                                Wna16Act act, cudaStream_t stream);
// out[k, n] = W[k, n] in `act` for every input row k and n < N_pad; out: [K, N_pad].
cudaError_t launch_wna16_dequant(const Wna16DeviceWeights& w, void* out, Wna16Act act, cudaStream_t stream);
// y[m, n] = bias[n] in `act` (the C operand of a GEMM with beta = 1). y: [M, N].
cudaError_t launch_wna16_bias_rows(const float* bias, int64_t M, int64_t N, void* y, Wna16Act act,
                                   cudaStream_t stream);

}  // namespace qlm::cuda
