// Kernels of `cuda_scaled_mm_fp8_fast` (scaled_mm_fp8_fast.cc): FP8 e4m3 W8A8 for few tokens; the GEMM serves
// `cuda_scaled_mm_int8_fast` (scaled_mm_int8_fast.cc) too, with INT8 codes (Fp8FastGemmArgs::int8).
//
// w8a8_quant_token: dynamic per-token activation quantizer (e4m3, or symmetric INT8), one block per row with
// 16-byte loads; rows of up to 32768 16-bit (16384 F32) elements are read once and held in
// registers between the absmax and the codes, longer ones are read twice. Bit-identical to
// launch_act_quant's kDynamicToken (and so to the CPU quantizer), which reads and writes an element at a time.
//
// fp8_fast_gemm: a weight-streaming GEMM over the weights in their standard [N, K] layout. The
// roles of mma.sync.m16n8k32 (e4m3, f32 accumulate) are swapped: its 16-row A operand is 16
// weight rows, its 8-column B operand 8 tokens, so M <= 8 costs one B tile. A block is 8 warps of
// 16 weight rows each (128 rows) over one K slice; the block's activation codes of the slice are
// staged in shared memory in chunks; weights go straight from global memory to registers (16-byte
// loads, one 256-column step ahead). Because the dot product does not care in which order k is
// summed, each lane feeds the MMA the bytes it loaded contiguously (weights and activations use
// the same k permutation). With one K slice the epilogue (s_x[m] * s_w[n] * acc + bias, rounded
// to the output type) is fused; with several, the slices write F32 partials and fp8_fast_reduce sums them and
// applies the epilogue (summing them in the last slice of each column block to finish instead measured slower at 4-16
// tokens and even at one: docs/fp8-kernel-notes.md, session 50). With INT8 codes the MMA is
// m16n8k32 s8 -> s32 (the same fragment layout), the sums exact int32 until the epilogue converts them. Plain
// declarations (C++17, no qlm headers): included by .cu and .cc files alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::cuda {

constexpr int kFp8FastRowsPerBlock = 128;  // weight rows (outputs n) per block
constexpr int kFp8FastStepK = 256;         // K must be a multiple
constexpr int kFp8FastMaxTokens = 64;      // tokens per launch (the host splits larger M)

struct Fp8FastGemmArgs {
  bool int8 = false;            // INT8 (s8) codes instead of FP8 e4m3, weights and activations alike
  const uint8_t* w = nullptr;   // [N, K] e4m3 (or INT8) codes
  const uint8_t* xq = nullptr;  // [M, K] e4m3 (or INT8) activation codes
  const float* sx = nullptr;    // [M] activation scales
  const float* sw = nullptr;    // weight scales: [N] (sw_stride 1) or [1] (sw_stride 0)
  int sw_stride = 0;
  const float* bias = nullptr;  // [N] or null
  void* y = nullptr;            // [M, N] of y_type (kF32 / kF16 / kBF16 of act_quant.h)
  int y_type = 0;
  float* partial = nullptr;     // [splits, M, N] when splits > 1
  int64_t M = 0, N = 0, K = 0;  // M <= kFp8FastMaxTokens
  int splits = 1;
  int64_t k_slice = 0;  // columns per split, a multiple of kFp8FastStepK
  // Launch with programmatic dependent launch (capability >= 90): the GEMM starts streaming its
  // first weights while the quantizer before it finishes, and waits before reading the codes.
  bool pdl = false;
  // Quantization inside the GEMM (M <= kFp8FastFusedQuantMaxTokens, dynamic per-token scales): when x is set the
  // kernel reads the activations [M, K] of y_type itself instead of xq / sx: every block takes each token's absmax
  // over the whole row and encodes the codes it stages, bit for bit as w8a8_quant_token would (FP8 or symmetric
  // INT8). Block (0, 0) writes the scales to sx_out [M] (for the split reduction, and for callers that want them).
  const void* x = nullptr;
  float* sx_out = nullptr;
};
// Tokens up to which the GEMM may quantize its activations itself: every block reads each token's whole row (from
// L2) for the absmax, so this stays small.
constexpr int kFp8FastFusedQuantMaxTokens = 4;

// Tokens per MMA column tile group of the kernel instance that serves M tokens (8, 16, 32, 64).
int fp8_fast_tile_tokens(int64_t M);
// Resident blocks per multiprocessor of the instance for `tile_tokens` (FP8 or INT8 codes).
cudaError_t fp8_fast_occupancy(int tile_tokens, bool int8, int* blocks_per_sm);
cudaError_t launch_fp8_fast_gemm(const Fp8FastGemmArgs& args, cudaStream_t stream);

// Dynamic per-token activation codes [M, K] (e4m3, or symmetric INT8 when int8) and scales [M] of x [M, K] of x_type,
// bit for bit act_quant.cu's (and the CPU quantizer's); K a multiple of 8. pdl: launched for programmatic dependent
// launch (its launch overlaps the previous kernel's tail; it waits for that kernel before reading x or writing).
cudaError_t launch_w8a8_quant_token(const void* x, int x_type, int64_t M, int64_t K, bool int8, void* codes,
                                    float* scales, bool pdl, cudaStream_t stream);

}  // namespace qlm::cuda
