// The grouped 4-bit WNA16 MoE GEMM on tensor cores (launch_moe_wna16_mma, moe_wna16_kernels.h): one launch for
// every expert, the experts' weights read in the `cuda_wna16` layout as they are (no second copy).
//
// A block is 4 warps over 128 output columns (32 per warp) of one row tile of one expert and one K split. A lane
// (g = lane / 4, t = lane % 4) loads, per step of 4 chunks (32 packed rows), the 16-byte code vector of columns
// col .. col + 3 (col = warp's first column + 4g) of chunk c + t. Its 8 codes per column become four (k, k + 4)
// pairs of 16-bit values by one lop3 each (the magic-number conversion: base + code, exact), and two columns'
// pairs are the A fragment of an m16n8k16 MMA: A row g <- column col + 2p, row g + 8 <- column col + 2p + 1 (p = 0, 1),
// its k order the lanes' chunks and the pair order. The rows (tokens) of the tile are the B operand, 8 per MMA,
// loaded as one 16-byte vector per lane and chunk in the same k order (the gathers write them so). Hence per step
// a lane issues one code load, one activation load per 8 rows, 12 lop3 / shifts, 16 subtractions of the zero point
// (exact) and 4 MMAs per 8 rows, against 8 FMAs per weight and row for the CUDA-core GEMV.
//
// Groups: a quad of chunks never straddles two (cuda_wna16_groups_in_quads, checked on the host), so the MMAs of
// one group accumulate in their own F32 registers and the group's F32 scales multiply them once when the group ends.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/moe_wna16_kernels.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/wna16_fast_device.cuh"

namespace qlm::cuda {
namespace {

constexpr int kWarps = kMoeMmaColumns / 32;
constexpr int kStepsInFlight = 4;  // steps of code loads issued before the first is used, per lane

// The 16-bit pair (base + z, base + z) of the magic-number conversion: 128 + z in BF16, 1024 + z in F16, both exact.
template <bool BF16>
__device__ __forceinline__ uint32_t base_zero_pair(int z) {
  const uint32_t h = BF16 ? 0x4300u + static_cast<uint32_t>(z) : 0x6400u + static_cast<uint32_t>(z);
  return h | (h << 16);
}

// The block's row tile, the lane's columns and K range.
template <int NT>
struct TileSetup {
  Wna16DeviceWeights w;  // by value: registers, not reloads
  int64_t r0;            // first row of the tile
  int nrows;             // rows of the tile (<= 8 NT)
  int g, t;              // lane / 4, lane % 4
  int64_t col;           // the lane's first column (4 of them)
  bool col_ok;           // col < N_pad (N_pad is a multiple of 8: all 4 columns in or all out)
  int64_t quads;         // N_pad / 4
  const uint4* codes;    // the lane's code vector of chunk 0; chunk c at + c * quads
  int64_t c_begin, c_end;
  const uint4* xrow[NT];  // the B operand: row 8 nt + g of the tile, chunk c at + c
  bool xok[NT];           // ... is a row of the tile (zeros past them)

  // False where the block's tile is past the last one (the whole block leaves).
  __device__ __forceinline__ bool init(const MoeWna16Experts& ex, const uint16_t* xb, int64_t stride, int64_t cps) {
    const int64_t tile = blockIdx.y;
    const int e = __ldg(ex.tile_expert + tile);  // (in the array: the grid's tiles; valid below the count)
    if (tile >= __ldg(ex.tile_offsets + ex.num_experts)) return false;
    r0 = __ldg(ex.offsets + e) + (tile - __ldg(ex.tile_offsets + e)) * (8 * NT);
    nrows = static_cast<int>(min(int64_t{8 * NT}, __ldg(ex.offsets + e + 1) - r0));
    w = ex.table[e];
    const int lane = threadIdx.x & 31;
    g = lane >> 2;
    t = lane & 3;
    col = blockIdx.x * int64_t{kMoeMmaColumns} + (threadIdx.x >> 5) * 32 + 4 * g;
    col_ok = col < w.N_pad;
    quads = w.N_pad / 4;
    codes = reinterpret_cast<const uint4*>(w.codes) + col / 4;
    c_begin = blockIdx.z * cps;
    c_end = min(c_begin + cps, w.chunks);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      xok[nt] = 8 * nt + g < nrows;
      xrow[nt] = reinterpret_cast<const uint4*>(xb + (r0 + (xok[nt] ? 8 * nt + g : 0)) * stride);
    }
    return true;
  }
};

// A lane's accumulators: acc (scaled) and gacc (the current group's MMAs on code - zero), both [nt][p][4]:
// columns col + 2p (elements 0, 1) and col + 2p + 1 (2, 3) of rows 8 nt + 2t (0, 2) and + 1 (1, 3).
template <bool BF16, int NT>
struct Accumulators {
  float acc[NT][2][4], gacc[NT][2][4];
  uint32_t zz[4];  // base + zero of the lane's 4 columns in the current group
  int g_cur = -1;

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][p][i] = gacc[nt][p][i] = 0.0f;
  }

  // Adds the current group's sums times its F32 scales to acc and clears them.
  __device__ __forceinline__ void end_group(const TileSetup<NT>& s) {
    const float4 v = s.col_ok ? __ldg(reinterpret_cast<const float4*>(s.w.scales + g_cur * s.w.N_pad + s.col))
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float sc[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        acc[nt][p][0] = fmaf(sc[2 * p], gacc[nt][p][0], acc[nt][p][0]);
        acc[nt][p][1] = fmaf(sc[2 * p], gacc[nt][p][1], acc[nt][p][1]);
        acc[nt][p][2] = fmaf(sc[2 * p + 1], gacc[nt][p][2], acc[nt][p][2]);
        acc[nt][p][3] = fmaf(sc[2 * p + 1], gacc[nt][p][3], acc[nt][p][3]);
        gacc[nt][p][0] = gacc[nt][p][1] = gacc[nt][p][2] = gacc[nt][p][3] = 0.0f;
      }
  }

  __device__ __forceinline__ void begin_group(const TileSetup<NT>& s, int grp) {
    g_cur = grp;
    uint32_t zv = 0;
    if (s.w.zeros != nullptr && s.col_ok)
      zv = __ldg(reinterpret_cast<const uint32_t*>(s.w.zeros + grp * s.w.N_pad + s.col));
#pragma unroll
    for (int j = 0; j < 4; ++j)
      zz[j] = base_zero_pair<BF16>(s.w.zeros != nullptr ? static_cast<int>((zv >> (8 * j)) & 0xFFu) : s.w.implied_zero);
  }

  // One step (4 chunks) whose chunks are in group grp: the lane's code vector q and B vectors xv.
  __device__ __forceinline__ void step(const TileSetup<NT>& s, int grp, const uint4& q, const uint4 (&xv)[NT]) {
    if (grp != g_cur) {  // uniform across the warp
      if (g_cur >= 0) end_group(s);
      begin_group(s, grp);
    }
    constexpr uint32_t kMagic = BF16 ? 0x43004300u : 0x64006400u;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const uint32_t wa = word_of(q, 2 * p), wb = word_of(q, 2 * p + 1);
        const uint32_t a[4] = {sub_pair<BF16>(lop_and_or(wa >> (8 * h), 0x000F000Fu, kMagic), zz[2 * p]),
                               sub_pair<BF16>(lop_and_or(wb >> (8 * h), 0x000F000Fu, kMagic), zz[2 * p + 1]),
                               sub_pair<BF16>(lop_and_or(wa >> (8 * h + 4), 0x000F000Fu, kMagic), zz[2 * p]),
                               sub_pair<BF16>(lop_and_or(wb >> (8 * h + 4), 0x000F000Fu, kMagic), zz[2 * p + 1])};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma16816<BF16>(gacc[nt][p], a, word_of(xv[nt], 2 * h), word_of(xv[nt], 2 * h + 1));
      }
  }

  __device__ __forceinline__ void finish_and_store(const TileSetup<NT>& s, const MoeWna16Experts& ex, int64_t N,
                                                   float* partial) {
    if (g_cur >= 0) end_group(s);
    if (!s.col_ok) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int m = 8 * nt + 2 * s.t + i;
        if (m >= s.nrows) continue;
        float* out = partial + (blockIdx.z * ex.rows_total + s.r0 + m) * N + s.col;
        const float v[4] = {acc[nt][0][i], acc[nt][0][2 + i], acc[nt][1][i], acc[nt][1][2 + i]};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (s.col + j < N) out[j] = v[j];
      }
  }
};

// Loads in registers: kStepsInFlight steps' code vectors issued before the first is used. NT: 8-row MMA tiles per
// block (tile_m = 8 NT). The activations of 8- and 16-row tiles are loaded with the codes, before any step runs
// (XPRE); 32-row tiles load them per step, from L1 / L2, which needs NT x kStepsInFlight fewer registers. Measured
// (H200, session 42, docs/moe-kernel-notes.md): XPRE 6-16 % faster on Mixtral at 1-64 tokens, 16 % slower on its
// 32-row tiles at 256; 8 steps in flight and launch bounds for 4-8 blocks per SM were slower everywhere. (A
// per-warp cp.async ring of shared memory, 4-8 steps deep, measured 20-40 % slower at 1-256 tokens: session 41.)
template <bool BF16, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    mma_kernel(MoeWna16Experts ex, const uint16_t* __restrict__ xb, int64_t stride, int64_t N, int64_t cps,
               float* __restrict__ partial) {
  constexpr int U = kStepsInFlight;
  constexpr bool XPRE = NT <= 2;
  pdl_enter();
  TileSetup<NT> s;
  if (!s.init(ex, xb, stride, cps)) return;  // uniform: the whole block leaves
  Accumulators<BF16, NT> a;
  a.clear();
  const uint64_t policy = evict_first_policy();
  for (int64_t c0 = s.c_begin; c0 < s.c_end; c0 += 4 * U) {
    uint4 qv[U];
    int grp[U];
    uint4 xpre[XPRE ? U : 1][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 4 * u;
      const bool ok = c < s.c_end;
      qv[u] = ok && s.col_ok ? ld_stream(s.codes + (c + s.t) * s.quads, policy) : make_uint4(0u, 0u, 0u, 0u);
      grp[u] = ok ? __ldg(s.w.chunk_group + c) : -1;
      if constexpr (XPRE) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          xpre[u][nt] = ok && s.xok[nt] ? __ldg(s.xrow[nt] + c + s.t) : make_uint4(0u, 0u, 0u, 0u);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 4 * u;
      if (c >= s.c_end) break;  // uniform across the block
      if constexpr (XPRE) {
        a.step(s, grp[u], qv[u], xpre[u]);
      } else {
        uint4 xv[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) xv[nt] = s.xok[nt] ? __ldg(s.xrow[nt] + c + s.t) : make_uint4(0u, 0u, 0u, 0u);
        a.step(s, grp[u], qv[u], xv);
      }
    }
  }
  a.finish_and_store(s, ex, N, partial);
}

template <bool BF16>
cudaError_t launch_tiles(const MoeWna16Experts& ex, dim3 grid, const uint16_t* xb, int64_t stride, int64_t N,
                         int64_t cps, float* partial, cudaStream_t stream) {
  switch (ex.tile_m) {
    case 8: return launch_pdl(mma_kernel<BF16, 1>, grid, kWarps * 32, 0, stream, ex, xb, stride, N, cps, partial);
    case 16: return launch_pdl(mma_kernel<BF16, 2>, grid, kWarps * 32, 0, stream, ex, xb, stride, N, cps, partial);
    case 32: return launch_pdl(mma_kernel<BF16, 4>, grid, kWarps * 32, 0, stream, ex, xb, stride, N, cps, partial);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_moe_wna16_mma(const MoeWna16Experts& ex, Wna16Act act, int64_t N, int64_t N_pad, int64_t max_tiles,
                                 const void* xb, int64_t stride, int splits, int64_t chunks_per_split, float* partial,
                                 cudaStream_t stream) {
  const int64_t col_blocks = moe_mma_column_blocks(N_pad);
  if (max_tiles < 1 || max_tiles > 65535 || splits < 1 || splits > 65535 || chunks_per_split < 4 ||
      chunks_per_split % 4 != 0 || stride % 8 != 0 || N_pad % 8 != 0 || col_blocks < 1 || col_blocks > INT32_MAX)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(max_tiles), static_cast<unsigned>(splits));
  const auto* x16 = static_cast<const uint16_t*>(xb);
  switch (act) {
    case Wna16Act::BF16: return launch_tiles<true>(ex, grid, x16, stride, N, chunks_per_split, partial, stream);
    case Wna16Act::F16: return launch_tiles<false>(ex, grid, x16, stride, N, chunks_per_split, partial, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace qlm::cuda
