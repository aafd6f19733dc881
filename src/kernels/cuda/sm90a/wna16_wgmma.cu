// The wgmma GEMM of `cuda_wna16_fast` for 4-bit weights (declarations and layout: wna16_wgmma.h).
// Compiled for sm_90a only, with the other kernels of this directory.
//
// Block: one producer warp and two consumer warpgroups over a tile of 256 output columns (4 column
// blocks of 64; warpgroup i owns blocks 2i and 2i+1) x TN tokens. Per stage of 8 k-tiles the producer
// moves the codes (one `cp.async.bulk` per column block) and the scales / zeros of the groups the stage
// touches (one per group), and writes the token tile of x itself: each row's 16-k tile is reordered
// into the MMA's k order (the fast layout pairs MMA k slots 2t, 2t+1, 2t+8, 2t+9 with packed rows
// 4t..4t+3: slots 0-7 take words 0, 2, 4, 6 of the tile, slots 8-15 words 1, 3, 5, 7) and stored with
// the 128-byte swizzle wgmma reads (16-byte chunk c of row r at c ^ (r % 8)), rows >= M and k-tiles
// past K as zeros. full[s] expects the producer twice (the bulk copies' expect_tx, then the x tile
// after a proxy fence) plus the copies' bytes; empty[s] the 8 consumer warps.
//
// Consumers: warp j of a warpgroup dequantizes rows 16j..16j+15 of each of its column blocks (the v1
// conversion, one 16-byte shared-memory read per 4 k-tiles), then the warpgroup issues one
// m64nTNk16 wgmma per column block with those registers as A and the x tile as B, and waits for it
// before the registers are reused. Work split and partial sums: stream-K over the k-stages of all
// (m-tile, column-tile) pairs, as in wna16_stream_kernels.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/bulk_pipeline.cuh"
#include "kernels/cuda/wna16_fast_device.cuh"
#include "kernels/cuda/wna16_wgmma.h"

namespace qlm::cuda {
namespace {

constexpr int kKS = 8;  // k-tiles per stage: two 64-wide swizzle atoms of x per token row
constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;
constexpr int kMaxStages = 8;
constexpr int kBlockStageBytes = kKS * 512;  // codes of one column block per stage
constexpr int kAlign = 1024;                 // 128-byte swizzle atoms: 8 rows x 128 bytes

// Column blocks per warpgroup: two for 64-token tiles, one for 128 (the accumulators of two would not
// fit: a block of 9 warps gets at most 168 registers per thread).
template <int TN>
struct WgShape {
  static constexpr int kBPW = TN == 64 ? 2 : 1;
  static constexpr int kWN = 2 * kBPW;                       // column blocks of 64 per tile
  static constexpr int kCols = kWN * 64;                     // output columns per tile
  static constexpr int kCodeBytes = kWN * kBlockStageBytes;  // codes per stage
  static constexpr int kXBytes = TN * kKS * 32;              // two [TN][64] halves of 16-bit elements
  static constexpr int kAcc = TN / 2;                        // f32 accumulators per thread per column block
};

// Shared-memory matrix descriptor of a K-major operand with the 128-byte swizzle: start address,
// stride 1024 bytes between 8-row groups (leading offset unused for this layout).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (static_cast<uint64_t>(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Keeps the compiler from moving accesses of the accumulators across the asynchronous MMAs.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma m64nNk16, f32 accumulators (d += A B), A from registers, B K-major from shared memory; one
// function per shape and element type (TY: "bf16" or "f16"). The operand lists are generated.
#define QLM_WGMMA_M64N64K16(NAME, TY)                                                                                 \
  __device__ __forceinline__ void NAME(float(&d)[32], const uint32_t(&a)[4], uint64_t desc_b) {                       \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                                    \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                                                       \
        " {"                                                                                                          \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                              \
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"                                                              \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                   \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                                                   \
  }
#define QLM_WGMMA_M64N128K16(NAME, TY)                                                                                \
  __device__ __forceinline__ void NAME(float(&d)[64], const uint32_t(&a)[4], uint64_t desc_b) {                       \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                                    \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY                                                      \
        " {"                                                                                                          \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                            \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                            \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                              \
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"                                                              \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),     \
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),     \
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),     \
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),     \
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                   \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                                                   \
  }
QLM_WGMMA_M64N64K16(wgmma_m64n64k16_bf16, "bf16")
QLM_WGMMA_M64N64K16(wgmma_m64n64k16_f16, "f16")
QLM_WGMMA_M64N128K16(wgmma_m64n128k16_bf16, "bf16")
QLM_WGMMA_M64N128K16(wgmma_m64n128k16_f16, "f16")
#undef QLM_WGMMA_M64N64K16
#undef QLM_WGMMA_M64N128K16

template <int TN, bool BF16>
__device__ __forceinline__ void wgmma_rs(float (&d)[TN / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (TN == 64 && BF16) wgmma_m64n64k16_bf16(d, a, desc_b);
  if constexpr (TN == 64 && !BF16) wgmma_m64n64k16_f16(d, a, desc_b);
  if constexpr (TN == 128 && BF16) wgmma_m64n128k16_bf16(d, a, desc_b);
  if constexpr (TN == 128 && !BF16) wgmma_m64n128k16_f16(d, a, desc_b);
}

__global__ void repack_kernel(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int64_t n_blocks,
                              int64_t k_tiles, int64_t kq_total) {
  const int64_t total = n_blocks * kq_total * 512;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int kk = static_cast<int>(i & 3), lane = static_cast<int>((i >> 2) & 31), jt = static_cast<int>((i >> 7) & 3);
    const int64_t rest = i >> 9, kq = rest % kq_total, b = rest / kq_total, kt = kq * 4 + kk;
    out[i] = kt < k_tiles ? in[((b * k_tiles + kt) * 32 + lane) * 4 + jt] : 0u;
  }
}

template <bool BF16, int TN, bool ZP>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_kernel(const Wna16FastArgs w, const uint32_t* __restrict__ codes_wg, const uint16_t* __restrict__ x,
                 int64_t ldx, int M, int stages, int stage_bytes, int par_bytes, int64_t max_segments,
                 float* __restrict__ ws, unsigned* __restrict__ counters, const float* __restrict__ bias,
                 uint16_t* __restrict__ y) {
  using namespace bulk;
  using S = WgShape<TN>;
  constexpr int kXBytes = S::kXBytes, kAcc = S::kAcc, kBPW = S::kBPW, kWN = S::kWN, kCols = S::kCols;
  constexpr int kCodeBytes = S::kCodeBytes;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxStages];
  __shared__ bool last_segment;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t n_blocks = w.n_blocks, k_tiles = w.k_tiles, kq_total = (k_tiles + 3) / 4;
  const int tpg = static_cast<int>(w.tiles_per_group);
  const int64_t per_tile = (k_tiles + kKS - 1) / kKS;
  const int64_t n_tiles = (n_blocks + kWN - 1) / kWN, m_tiles = (M + TN - 1) / TN;
  const int64_t T = m_tiles * n_tiles * per_tile, G = gridDim.x;
  const int64_t q_begin = blockIdx.x * T / G, q_end = (blockIdx.x + 1) * T / G;
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t sbase = (raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  unsigned char* const smem = smem_raw + (sbase - raw);
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kMaxStages]);

  if (tid == 0) {
    for (int i = 0; i < stages; ++i) {
      mbar_init(full0 + 8 * i, 2);
      mbar_init(empty0 + 8 * i, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer
    const uint64_t policy = evict_first_policy();
    const uint4* scales = reinterpret_cast<const uint4*>(w.scales);
    const uint4* zeros = reinterpret_cast<const uint4*>(w.zeros);
    int64_t tile = q_begin / per_tile, j = q_begin % per_tile;
    int64_t g_lo = j * kKS / tpg;
    int r_lo = static_cast<int>(j * kKS % tpg);
    int slot = 0;
    uint32_t phase = 0;
    for (int64_t q = q_begin; q < q_end; ++q) {
      const int64_t mi = tile / n_tiles, nt = tile % n_tiles;
      const int64_t k0 = j * kKS, nb0 = nt * kWN, m0 = mi * TN;
      const int nvalid = static_cast<int>(n_blocks - nb0 < kWN ? n_blocks - nb0 : kWN);
      const int nkt = static_cast<int>(k_tiles - k0 < kKS ? k_tiles - k0 : kKS);
      const int nkq = static_cast<int>(kq_total - k0 / 4 < 2 ? kq_total - k0 / 4 : 2);
      const int rows = static_cast<int>(M - m0 < TN ? M - m0 : TN);
      int ng = 1;
      for (int r = r_lo + nkt - 1; r >= tpg; r -= tpg) ++ng;
      if (q - q_begin >= stages) mbar_wait(empty0 + 8 * slot, phase ^ 1u);
      const uint32_t code_bytes = nkq * 2048;
      const uint32_t bytes = nvalid * code_bytes + (ZP ? 2 : 1) * ng * nvalid * 128;
      unsigned char* const st = smem + slot * stage_bytes;
      const uint32_t base = sbase + slot * stage_bytes, bar = full0 + 8 * slot;
      if (lane == 0) mbar_expect_tx(bar, bytes);
      __syncwarp();
      if (lane < nvalid) {
        const uint32_t* src = codes_wg + ((nb0 + lane) * kq_total + k0 / 4) * 512;
        const uint32_t dst = base + kXBytes + lane * kBlockStageBytes;
        if (m_tiles == 1)
          bulk_load_hint(dst, src, code_bytes, bar, policy);
        else
          bulk_load(dst, src, code_bytes, bar);
      }
      if (lane < ng) {
        const int64_t src = ((g_lo + lane) * n_blocks + nb0) * 8;
        const uint32_t dst = base + kXBytes + kCodeBytes + lane * (kWN * 128);
        bulk_load(dst, scales + src, nvalid * 128, bar);
        if constexpr (ZP) bulk_load(dst + par_bytes, zeros + src, nvalid * 128, bar);
      }
      // The token tile of x, in the MMA's k order, swizzled; zeros where there is no data.
      for (int it = lane; it < TN * kKS; it += 32) {
        const int r = it / kKS, t = it % kKS;
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
        if (r < rows && k0 + t < k_tiles) {
          const uint4* src = reinterpret_cast<const uint4*>(x + (m0 + r) * ldx + (k0 + t) * 16);
          lo = __ldg(src);
          hi = __ldg(src + 1);
        }
        unsigned char* row = st + (t / 4) * (TN * 128) + r * 128;
        const int c0 = 2 * (t % 4), sw = r & 7;
        *reinterpret_cast<uint4*>(row + ((c0 ^ sw) << 4)) = make_uint4(lo.x, lo.z, hi.x, hi.z);
        *reinterpret_cast<uint4*>(row + (((c0 + 1) ^ sw) << 4)) = make_uint4(lo.y, lo.w, hi.y, hi.w);
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> wgmma's async reads
      __syncwarp();
      if (lane == 0) mbar_arrive(bar);
      if (++slot == stages) slot = 0, phase ^= 1u;
      if (++j == per_tile) {
        j = 0, ++tile, g_lo = 0, r_lo = 0;
      } else {
        for (r_lo += kKS; r_lo >= tpg; r_lo -= tpg) ++g_lo;
      }
    }
    return;
  }

  // Consumers: warpgroup wg owns column blocks kBPW wg .. kBPW wg + kBPW - 1; warp jw of it rows
  // 16jw..16jw+15 of each.
  const int wg = warp / 4, jw = warp % 4;
  const int g = lane >> 2, t4 = lane & 3;
  const uint4 zconst = make_uint4(w.zero_const, w.zero_const, w.zero_const, w.zero_const);
  int slot = 0;
  uint32_t phase = 0;
  int64_t q = q_begin;
  while (q < q_end) {
    const int64_t tile = q / per_tile, j0 = q % per_tile;
    const int64_t j1 = min(per_tile, j0 + (q_end - q));
    const int64_t mi = tile / n_tiles, nt = tile % n_tiles;
    const int64_t nb0 = nt * kWN, m0 = mi * TN;
    bool active[kBPW];
#pragma unroll
    for (int cb = 0; cb < kBPW; ++cb) active[cb] = nb0 + kBPW * wg + cb < n_blocks;

    float acc[kBPW][kAcc];
#pragma unroll
    for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[cb][i] = 0.0f;

    int64_t gl = j0 * kKS / tpg;
    int rl = static_cast<int>(j0 * kKS % tpg);
    for (int64_t jj = j0; jj < j1; ++jj) {
      mbar_wait(full0 + 8 * slot, phase);
      const int64_t k0 = jj * kKS;
      const unsigned char* st = smem + slot * stage_bytes;
      const uint32_t xs = sbase + slot * stage_bytes;
      const uint4* sc = reinterpret_cast<const uint4*>(st + kXBytes);
      const uint4* ss = reinterpret_cast<const uint4*>(st + kXBytes + kCodeBytes);
      const uint4* sz = reinterpret_cast<const uint4*>(st + kXBytes + kCodeBytes + par_bytes);
      int64_t gk = gl;
      int rk = rl;
      uint4 cw[kBPW];
#pragma unroll
      for (int kt = 0; kt < kKS; ++kt) {
        if (k0 + kt < k_tiles) {  // uniform over the block
          uint32_t a[kBPW][4];
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) {
            const int blk = kBPW * wg + cb;
            if (kt % 4 == 0) cw[cb] = sc[((blk * 2 + kt / 4) * 4 + jw) * 32 + lane];
            const int pi = (static_cast<int>(gk - gl) * kWN + blk) * 8 + g;
            const uint32_t sw = word_of(ss[pi], jw);
            uint32_t zw = zconst.x;
            if constexpr (ZP) zw = word_of(sz[pi], jw);
            dequant_tile<4, BF16>(word_of(cw[cb], kt % 4), 0u, __byte_perm(sw, 0, 0x1010), __byte_perm(sw, 0, 0x3232),
                                  __byte_perm(zw, 0, 0x1010), __byte_perm(zw, 0, 0x3232), a[cb]);
          }
          const uint64_t desc = sw128_desc(xs + (kt / 4) * (TN * 128) + (kt % 4) * 32);
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
          wgmma_fence();
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb)
            if (active[cb]) wgmma_rs<TN, BF16>(acc[cb], a[cb], desc);
          wgmma_commit();
          wgmma_wait_all();  // the A registers are rewritten for the next k-tile
#pragma unroll
          for (int cb = 0; cb < kBPW; ++cb) fence_regs(acc[cb]);
        }
        if (++rk == tpg) {
          rk = 0;
          ++gk;
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty0 + 8 * slot);
      if (++slot == stages) slot = 0, phase ^= 1u;
      for (rl += kKS; rl >= tpg; rl -= tpg) ++gl;
    }

    // Accumulator (cb, i, e): column (kBPW wg + cb) * 64 + 16 jw + g + 8 (e / 2), token 8 i + 2 t4 + e % 2.
    const int64_t n0 = nb0 * 64;
    auto column = [&](int cb, int e) { return (kBPW * wg + cb) * 64 + 16 * jw + g + 8 * (e >> 1); };
    auto token = [&](int i, int e) { return 8 * i + 2 * t4 + (e & 1); };
    if (j0 == 0 && j1 == per_tile) {
#pragma unroll
      for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t n = n0 + column(cb, e), m = m0 + token(i, e);
            if (n < w.N && m < M) {
              float v = acc[cb][4 * i + e];
              if (bias) v += bias[n];
              y[m * w.N + n] = to_bits(v, BF16);
            }
          }
    } else {
      const int64_t tile_q0 = tile * per_tile;
      const int64_t first = owner_of(tile_q0, T, G);
      const int64_t segments = owner_of(tile_q0 + per_tile - 1, T, G) - first + 1;
      constexpr int kTileFloats = TN * kCols;
      float* tile_ws = ws + tile * max_segments * kTileFloats;
      float* mine = tile_ws + (blockIdx.x - first) * kTileFloats;
#pragma unroll
      for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
        for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) __stcg(mine + token(i, e) * kCols + column(cb, e), acc[cb][4 * i + e]);
      __threadfence();
      consumer_sync<kConsumers>();
      if (tid == 0) last_segment = atomicAdd(counters + tile, 1u) == static_cast<unsigned>(segments - 1);
      consumer_sync<kConsumers>();
      if (last_segment) {
        __threadfence();
#pragma unroll
        for (int cb = 0; cb < kBPW; ++cb)
#pragma unroll
          for (int i = 0; i < kAcc / 4; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int64_t n = n0 + column(cb, e), m = m0 + token(i, e);
              if (n < w.N && m < M) {
                const int64_t at = token(i, e) * kCols + column(cb, e);
                float v = 0.0f;
                for (int64_t sgm = 0; sgm < segments; ++sgm) v += __ldcg(tile_ws + sgm * kTileFloats + at);
                if (bias) v += bias[n];
                y[m * w.N + n] = to_bits(v, BF16);
              }
            }
        if (tid == 0) counters[tile] = 0u;
      }
    }
    consumer_sync<kConsumers>();  // last_segment is reused by the next segment
    q += j1 - j0;
  }
}

template <bool BF16, int TN, bool ZP>
int smem_limit() {
  static const int limit = [] {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
      return 0;
    const int usable = optin - 1024;  // the static barriers and flag
    if (cudaFuncSetAttribute(wgmma_kernel<BF16, TN, ZP>, cudaFuncAttributeMaxDynamicSharedMemorySize, usable) !=
        cudaSuccess)
      return 0;
    return usable;
  }();
  return limit;
}

struct Plan {
  int stages = 0, stage_bytes = 0, par_bytes = 0;
  size_t smem = 0;
};

template <bool BF16, int TN, bool ZP>
Plan plan_of(const Wna16FastArgs& w) {
  const int64_t tpg = std::max<int64_t>(1, w.tiles_per_group);
  const int gslots = static_cast<int>(std::min<int64_t>(kKS, (kKS - 1) / tpg + 2));
  Plan p;
  p.par_bytes = gslots * WgShape<TN>::kWN * 128;
  const int raw = WgShape<TN>::kXBytes + WgShape<TN>::kCodeBytes + (ZP ? 2 : 1) * p.par_bytes;
  p.stage_bytes = (raw + kAlign - 1) / kAlign * kAlign;
  const int limit = smem_limit<BF16, TN, ZP>();
  p.stages = std::min<int>(kMaxStages, (limit - kAlign) / p.stage_bytes);
  if (p.stages < 2) p.stages = 0;
  p.smem = static_cast<size_t>(p.stages) * p.stage_bytes + kAlign;  // + room to align the base
  return p;
}

template <typename F, typename R>
R dispatch(bool bf16, int tn, bool zp, F&& f, R unmatched) {
  if (bf16 && tn == 64 && !zp) return f.template operator()<true, 64, false>();
  if (bf16 && tn == 64 && zp) return f.template operator()<true, 64, true>();
  if (bf16 && tn == 128 && !zp) return f.template operator()<true, 128, false>();
  if (bf16 && tn == 128 && zp) return f.template operator()<true, 128, true>();
  if (!bf16 && tn == 64 && !zp) return f.template operator()<false, 64, false>();
  if (!bf16 && tn == 64 && zp) return f.template operator()<false, 64, true>();
  if (!bf16 && tn == 128 && !zp) return f.template operator()<false, 128, false>();
  if (!bf16 && tn == 128 && zp) return f.template operator()<false, 128, true>();
  return unmatched;
}

struct UsableF {
  const Wna16FastArgs& w;
  template <bool H, int TN, bool Z>
  bool operator()() const {
    return plan_of<H, TN, Z>(w).stages >= 2;
  }
};

struct LaunchF {
  const Wna16FastArgs& w;
  const uint32_t* codes_wg;
  const void* x;
  int64_t ldx, M;
  int blocks;
  float* ws;
  unsigned* counters;
  const float* bias;
  void* y;
  cudaStream_t stream;
  template <bool H, int TN, bool Z>
  cudaError_t operator()() const {
    const Plan p = plan_of<H, TN, Z>(w);
    if (p.stages == 0) return cudaErrorInvalidValue;
    wgmma_kernel<H, TN, Z><<<blocks, kThreads, p.smem, stream>>>(
        w, codes_wg, static_cast<const uint16_t*>(x), ldx, static_cast<int>(M), p.stages, p.stage_bytes, p.par_bytes,
        wna16_wgmma_max_segments(w, M, TN, blocks), ws, counters, bias, static_cast<uint16_t*>(y));
    return cudaGetLastError();
  }
};

int64_t stages_per_tile(const Wna16FastArgs& w) { return (w.k_tiles + kKS - 1) / kKS; }

}  // namespace

bool wna16_wgmma_built() { return true; }

int64_t wna16_wgmma_code_words(const Wna16FastArgs& w) { return w.n_blocks * ((w.k_tiles + 3) / 4) * 512; }

cudaError_t launch_wna16_wgmma_repack(const Wna16FastArgs& w, uint32_t* out, cudaStream_t stream) {
  if (w.bits != 4) return cudaErrorInvalidValue;
  const int64_t total = wna16_wgmma_code_words(w);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535);
  repack_kernel<<<static_cast<unsigned>(std::max<int64_t>(blocks, 1)), threads, 0, stream>>>(
      static_cast<const uint32_t*>(w.codes), out, w.n_blocks, w.k_tiles, (w.k_tiles + 3) / 4);
  return cudaGetLastError();
}

bool wna16_wgmma_usable(const Wna16FastArgs& w, int tile_tokens) {
  if (w.bits != 4) return false;
  return dispatch(w.bf16, tile_tokens, w.zeros != nullptr, UsableF{w}, false);
}

int64_t wna16_wgmma_stage_count(const Wna16FastArgs& w, int64_t M, int tile_tokens) {
  const int64_t wn = tile_tokens == 64 ? WgShape<64>::kWN : WgShape<128>::kWN;
  const int64_t m_tiles = (M + tile_tokens - 1) / tile_tokens, n_tiles = (w.n_blocks + wn - 1) / wn;
  return m_tiles * n_tiles * stages_per_tile(w);
}

int64_t wna16_wgmma_max_segments(const Wna16FastArgs& w, int64_t M, int tile_tokens, int blocks) {
  const int64_t P = stages_per_tile(w), T = wna16_wgmma_stage_count(w, M, tile_tokens), G = std::max(1, blocks);
  return (P * G + T - 1) / T + 1;
}

cudaError_t launch_wna16_wgmma_gemm(const Wna16FastArgs& w, const uint32_t* codes_wg, const void* x, int64_t ldx,
                                    int64_t M, int tile_tokens, int blocks, float* ws, unsigned* counters,
                                    const float* bias, void* y, cudaStream_t stream) {
  if (w.bits != 4) return cudaErrorInvalidValue;
  return dispatch(w.bf16, tile_tokens, w.zeros != nullptr,
                  LaunchF{w, codes_wg, x, ldx, M, blocks, ws, counters, bias, y, stream}, cudaErrorInvalidValue);
}

}  // namespace qlm::cuda
