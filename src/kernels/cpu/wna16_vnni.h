// The integer kernel of `cpu_fast_avx512_vnni` (AVX-512 VNNI), every M.
//
// The float GEMV of cpu_fast_avx512 spends three instructions per 16 weights (shift, mask-or, FMA)
// and is compute-bound below the memory bandwidth on Zen 4; its GEMM reaches ~180 GFLOP/s on two
// cores, one f32 FMA (16 multiply-adds) per cycle. Here the weights stay integer codes:
// a word's fields are unpacked to bytes (one AND, or a shift and an AND, per 64 codes) and
// multiplied by `vpdpbusd` (unsigned code bytes x signed activation bytes, 64 products per
// instruction, one per cycle) into int32 accumulators per scale group: three limbs cost 48 products
// per instruction's worth of work against the FMA's 16 (measured on Zen 4: 1.9x the float GEMV at
// M = 1, where it meets the memory bandwidth, and 1.4x the float GEMM's throughput at M >= 32;
// docs/performance.md). Rows run in passes of two over a tile, in blocks of 64 rows for large M.
//
// The activations are not rounded to 8 bits: each (row, group) is split exactly into three signed
// 8-bit limbs, x ~= s * (x0 + x1 / 254 + x2 / 254^2) with s = max|x| / 127 (rounded to f32) and every
// limb in [-127, 127], so |x - reconstruction| <= s / 2 / 254^2 ~= 6.1e-8 * max|x| of the group (f32
// rounding of x itself is 6e-8 * |x|). Per group and limb the integer sum
// d = sum (code - z) * limb is exact; y += scale_w * s * (d0 + d1 / 254 + d2 / 254^2) in f32.
//
// Limb layout (limb-major, so a word's limbs are one permutation of its rows): for row m, limb l,
// word w (F = 32 / SB packed rows), unpack vector u (U = 8 / SB; code byte b of vector u is field
// U*b + u), the four bytes at int32 index (m * kVnniLimbs + l) * words * U + w * U + u are limb l of
// packed rows w*F + U*b + u, b = 0..3 — the order vpdpbusd pairs with the code bytes.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/wna16_layout.h"

namespace qlm {

inline constexpr int kVnniLimbs = 3;
inline constexpr int kVnniLimbBase = 254;
// Up to this M the VNNI kernel runs the integer GEMV; above it the float GEMM of cpu_fast_avx512.
inline constexpr int64_t kVnniMaxM = 1 << 20;

// Activations of one call in the limb layout above.
struct LimbActivations {
  int64_t M = 0;
  AlignedBuffer<int32_t> limbs;  // [M][kVnniLimbs][words][U] groups of four int8
  AlignedBuffer<float> scales;   // [M][groups]: s * 2^-SB (the layout's scales carry 2^SB)
  AlignedBuffer<int32_t> sums;   // [M][groups][kVnniLimbs]: sum of each limb over the group's rows

  // Sets M and grows the buffers for M rows of layer p (contents unspecified).
  void reserve(const PackedWna16& p, int64_t rows);
};

// Whether every int32 sum of the integer GEMV fits for this layer: a group of R packed rows sums
// R products of |code - z| <= 2^SB - 1 (2^SB for padded columns) and |limb| <= 127, and the
// zero-point term z * sum(limb) on the way. False sends every call to the float kernel.
bool wna16_vnni_sums_fit(const PackedWna16& p);

// Splits x [M, K] (row stride K) into limbs, read through p.row_source (portable reference; the
// kernel runs split_activation_limbs_avx512, which must give the same bytes). Returns false, leaving
// `out` unspecified, when an activation is NaN or infinite or a group's largest |x| is nonzero but
// so small that its scale s * 2^-SB would be subnormal (below 127 * 2^SB * FLT_MIN): the caller
// runs the float kernel, which propagates non-finite values as before.
bool split_activation_limbs(const PackedWna16& p, const float* x, int64_t M, LimbActivations& out);
// The same split in AVX-512 (the same double arithmetic, so the same limbs, scales and sums). Only
// when cpu_features().avx512.
bool split_activation_limbs_avx512(const PackedWna16& p, const float* x, int64_t M, LimbActivations& out);

// The integer kernel: y [M, N] = x W (+ bias), y fully written. Returns false without touching y
// where split_activation_limbs does. Call only when cpu_features().avx512_vnni and
// wna16_vnni_sums_fit(p).
bool wna16_vnni_gemv(const PackedWna16& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool);

}  // namespace qlm
