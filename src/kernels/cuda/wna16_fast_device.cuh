// Device helpers shared by the kernels of `cuda_wna16_fast` (wna16_fast_kernels.cu, the GEMV-style
// split-K kernel and the dequantizer; wna16_tiled_kernels.cu, the tiled GEMM): the MMA, the streaming
// cache policy and the exact code -> act-dtype conversion of one A fragment (layout:
// wna16_fast_layout.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qlm::cuda {

template <bool BF16>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

__device__ __forceinline__ uint4 ld_stream(const uint4* ptr, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr), "l"(policy));
  return v;
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// A scale or zero word holds the 16-bit values of a thread's two fragment rows (low half: row g, high: row g + 8);
// the dequantization multiplies 16-bit pairs, so each value is broadcast to both halves of its own word.
__device__ __forceinline__ void split_row_pair(uint32_t w, uint32_t& row_lo, uint32_t& row_hi) {
  row_lo = __byte_perm(w, 0, 0x1010);
  row_hi = __byte_perm(w, 0, 0x3232);
}

// Pairs of 16-bit act-dtype values (BF16 or F16) in a 32-bit word: v - z, and (v - z) * s, each rounded once per
// operation as the half-precision instructions do.
template <bool BF16>
__device__ __forceinline__ uint32_t sub_pair(uint32_t v, uint32_t z) {
  uint32_t r;
  if constexpr (BF16) {
    const __nv_bfloat162 d =
        __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), *reinterpret_cast<const __nv_bfloat162*>(&z));
    r = *reinterpret_cast<const uint32_t*>(&d);
  } else {
    const __half2 d = __hsub2(*reinterpret_cast<const __half2*>(&v), *reinterpret_cast<const __half2*>(&z));
    r = *reinterpret_cast<const uint32_t*>(&d);
  }
  return r;
}

template <bool BF16>
__device__ __forceinline__ uint32_t sub_mul(uint32_t v, uint32_t z, uint32_t s) {
  const uint32_t d = sub_pair<BF16>(v, z);
  uint32_t r;
  if constexpr (BF16) {
    const __nv_bfloat162 p =
        __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&d), *reinterpret_cast<const __nv_bfloat162*>(&s));
    r = *reinterpret_cast<const uint32_t*>(&p);
  } else {
    const __half2 p = __hmul2(*reinterpret_cast<const __half2*>(&d), *reinterpret_cast<const __half2*>(&s));
    r = *reinterpret_cast<const uint32_t*>(&p);
  }
  return r;
}

__device__ __forceinline__ uint32_t lop_and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));  // (a & b) | c
  return r;
}

// A fragment of one 16x16 tile from the thread's BITS/4 code words: a_p = (code - zero) * scale,
// zero/scale pair 0 for rows g (p even), 1 for rows g + 8 (p odd).
template <int BITS, bool BF16>
__device__ __forceinline__ void dequant_tile(uint32_t w0, uint32_t w1, uint32_t s0, uint32_t s1, uint32_t z0,
                                             uint32_t z1, uint32_t (&a)[4]) {
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    uint32_t raw;
    if constexpr (BITS == 4) {
      raw = lop_and_or(w0 >> (4 * p), 0x000F000Fu, BF16 ? 0x43004300u : 0x64006400u);
    } else if constexpr (!BF16) {
      const uint32_t w = p < 2 ? w0 : w1;
      raw = lop_and_or(w >> (8 * (p & 1)), 0x00FF00FFu, 0x64006400u);
    } else {
      const uint32_t w = p < 2 ? w0 : w1;
      const float lo = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u + (p & 1))) - 8388608.0f;
      const float hi = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7442u + (p & 1))) - 8388608.0f;
      __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
      raw = *reinterpret_cast<uint32_t*>(&h);
    }
    a[p] = sub_mul<BF16>(raw, (p & 1) ? z1 : z0, (p & 1) ? s1 : s0);
  }
}

// Late scaling (4-bit codes): the A fragment of one 16x16 tile holding the raw values base + code,
// exact in the act dtype (base = the conversion's magic: 128 for BF16, 1024 for F16), with no scale or
// zero applied: 7 instructions per tile instead of 15. A group's MMAs on these values give
// sum (base + c) x; with sum x over the same k-tiles (an MMA with kOnesFragment) the group adds
// s * (sum (base + c) x - (base + z) * sum x) = s * sum (c - z) x to the result (`apply_group`), and the
// weights are never rounded to the act dtype.
template <bool BF16>
__device__ __forceinline__ void raw_tile4(uint32_t w, uint32_t (&a)[4]) {
#pragma unroll
  for (int p = 0; p < 4; ++p) a[p] = lop_and_or(w >> (4 * p), 0x000F000Fu, BF16 ? 0x43004300u : 0x64006400u);
}

template <bool BF16>
__device__ __forceinline__ uint32_t ones_pair() {
  return BF16 ? 0x3F803F80u : 0x3C003C00u;
}

// Low / high 16-bit act-dtype value of a word, as f32 (exact).
template <bool BF16>
__device__ __forceinline__ float act_lo(uint32_t w) {
  if constexpr (BF16) return __uint_as_float(w << 16);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xFFFFu)));
}
template <bool BF16>
__device__ __forceinline__ float act_hi(uint32_t w) {
  if constexpr (BF16) return __uint_as_float(w & 0xFFFF0000u);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}

// One output's share of a group: res + s * (sum - (base + z) * sum x), the product (base + z) * sum x exact in
// the inner fma (the cancellation against sum happens before any rounding of the difference).
__device__ __forceinline__ float add_group_share(float res, float s, float base_z, float sum, float sum_x) {
  return fmaf(s, fmaf(-base_z, sum_x, sum), res);
}

// Adds one group's share to acc and clears the group sums: accg[j][mt] are the MMA sums of tile j on raw
// values (rows g, g + 8 = columns of the tile; tokens 2t, 2t + 1), sx[mt] the sums of x (c0, c1: tokens
// 2t, 2t + 1), sv / zv the group's scale and base + zero words (word j: row g low, row g + 8 high).
template <bool BF16, int MT>
__device__ __forceinline__ void apply_group(const uint4& sv, const uint4& zv, float (&accg)[4][MT][4],
                                            float (&sx)[MT][4], float (&acc)[4][MT][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t sw = word_of(sv, j), zw = word_of(zv, j);
    const float s0 = act_lo<BF16>(sw), s1 = act_hi<BF16>(sw), z0 = act_lo<BF16>(zw), z1 = act_hi<BF16>(zw);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      acc[j][mt][0] = add_group_share(acc[j][mt][0], s0, z0, accg[j][mt][0], sx[mt][0]);
      acc[j][mt][1] = add_group_share(acc[j][mt][1], s0, z0, accg[j][mt][1], sx[mt][1]);
      acc[j][mt][2] = add_group_share(acc[j][mt][2], s1, z1, accg[j][mt][2], sx[mt][0]);
      acc[j][mt][3] = add_group_share(acc[j][mt][3], s1, z1, accg[j][mt][3], sx[mt][1]);
#pragma unroll
      for (int c = 0; c < 4; ++c) accg[j][mt][c] = 0.0f;
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int c = 0; c < 4; ++c) sx[mt][c] = 0.0f;
}

// The mma.sync accumulators of one 64-column block (four 16-column tiles) x MT 8-token m-tiles, cleared.
template <int MT>
__device__ __forceinline__ void zero_block_acc(float (&acc)[4][MT][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][mt][c] = 0.0f;
}

// Adds a warp's accumulators of one 64-column block into red ([token][64 columns] floats) with atomicAdd, the tokens
// m0 + ml < M only: the k-slice warps of a block summing into its tile (element c of tile j, m-tile mt: column
// 16 j + g + 8 (c >> 1), token 8 mt + 2 t + (c & 1), as in sum_k_slices).
template <int MT>
__device__ __forceinline__ void atomic_add_block_acc(float* red, const float (&acc)[4][MT][4], int m0, int M, int g,
                                                     int t) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int nl = 16 * j + g + 8 * (c >> 1), ml = mt * 8 + 2 * t + (c & 1);
        if (m0 + ml < M) atomicAdd(&red[ml * 64 + nl], acc[j][mt][c]);
      }
}

template <int MT>
__device__ __forceinline__ void zero_late_sums(float (&accg)[4][MT][4], float (&xsum)[MT][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      xsum[mt][c] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) accg[j][mt][c] = 0.0f;
    }
}

// One 16-row k-tile of a 64-column block with late scaling, MT token m-tiles: the raw-code MMAs of its four
// 16x16 tiles (codes: the lane's word j for tile j; xb[mt]: the B fragment of m-tile mt) and the x-sum MMAs.
template <bool BF16, int MT>
__device__ __forceinline__ void late_k_tile(const uint4& codes, const uint2 (&xb)[MT], float (&accg)[4][MT][4],
                                            float (&xsum)[MT][4]) {
  const uint32_t ones[4] = {ones_pair<BF16>(), ones_pair<BF16>(), ones_pair<BF16>(), ones_pair<BF16>()};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t a[4];
    raw_tile4<BF16>(word_of(codes, j), a);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) mma16816<BF16>(accg[j][mt], a, xb[mt].x, xb[mt].y);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) mma16816<BF16>(xsum[mt], ones, xb[mt].x, xb[mt].y);
}

template <int BITS, bool BF16>
__device__ __forceinline__ void dequant_block_tile(const uint4 (&wv)[BITS / 4], const uint4& sv, const uint4& zv, int j,
                                                   uint32_t (&a)[4]) {
  const uint32_t sw = word_of(sv, j), zw = word_of(zv, j);
  uint32_t s0, s1, z0, z1;
  split_row_pair(sw, s0, s1);
  split_row_pair(zw, z0, z1);
  uint32_t w0, w1 = 0;
  if constexpr (BITS == 4) {
    w0 = word_of(wv[0], j);
  } else {
    w0 = word_of(wv[j >> 1], (j & 1) * 2);
    w1 = word_of(wv[j >> 1], (j & 1) * 2 + 1);
  }
  dequant_tile<BITS, BF16>(w0, w1, s0, s1, z0, z1, a);
}

// Sums the mma.sync accumulators of the kWK k-slices of a tile in shared memory: warp (wn, wk) adds its
// acc (4 16-column tiles of column block wn x MT 8-token m-tiles) into red ([token][column] floats, row
// stride red_row), slice 0 first; sync() (a barrier over every warp of the tile) after each slice.
template <int kWK, int MT, typename Sync>
__device__ __forceinline__ void sum_k_slices(float* red, int red_row, int wn, int wk, int g, int t,
                                             const float (&acc)[4][MT][4], Sync sync) {
#pragma unroll
  for (int h = 0; h < kWK; ++h) {
    if (wk == h) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int nl = wn * 64 + 16 * j + g + 8 * (c >> 1), ml = mt * 8 + 2 * t + (c & 1);
            float* p = red + ml * red_row + nl;
            *p = h == 0 ? acc[j][mt][c] : *p + acc[j][mt][c];
          }
    }
    sync();
  }
}

__device__ __forceinline__ uint16_t to_bits(float v, bool bf16) {
  if (bf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(v);
    return *reinterpret_cast<uint16_t*>(&h);
  }
  __half h = __float2half_rn(v);
  return *reinterpret_cast<uint16_t*>(&h);
}

// Split-K partial sums, read by the block that finishes a tile: v[r] = the sum over slots q = 0 .. slots - 1 (in
// that order: the same floats whichever block finishes last) of slot0[q * stride + first + r * step], for the
// elements first + r * step < used (v[r] = 0 beyond). The loads of kU slots x PER elements (16 slots where a
// thread has one element) are issued before their adds, so a thread waits for one L2 round trip per kU slots —
// with the slots inside the elements' loop, every element waited for its own chain of loads (the wgmma kernel at
// M = 64 spent a third of its time there, Nsight Compute, notes v6g); kU keeps the loads in flight (and their
// registers) near 32 per thread.
template <int PER>
__device__ __forceinline__ void sum_partial_slots(const float* slot0, int64_t stride, int64_t slots, int first,
                                                  int step, int used, float (&v)[PER]) {
  constexpr int kU = PER >= 32 ? 1 : 32 / PER;
#pragma unroll
  for (int r = 0; r < PER; ++r) v[r] = 0.0f;
  int64_t q = 0;
  if (used - first <= step) {  // one element at most (one token, the GEMV-like calls): 16 slots per round trip
    if (first >= used) return;
    const float* e = slot0 + first;
    for (; q + 16 <= slots; q += 16) {
      float p[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) p[u] = __ldcg(e + (q + u) * stride);
#pragma unroll
      for (int u = 0; u < 16; ++u) v[0] += p[u];
    }
    for (; q < slots; ++q) v[0] += __ldcg(e + q * stride);
    return;
  }
  for (; q + kU <= slots; q += kU) {
    float p[kU][PER];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < PER; ++r)
        p[u][r] = first + r * step < used ? __ldcg(slot0 + (q + u) * stride + first + r * step) : 0.0f;
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < PER; ++r) v[r] += p[u][r];
  }
  for (; q < slots; ++q) {
#pragma unroll
    for (int r = 0; r < PER; ++r)
      if (first + r * step < used) v[r] += __ldcg(slot0 + q * stride + first + r * step);
  }
}

}  // namespace qlm::cuda
