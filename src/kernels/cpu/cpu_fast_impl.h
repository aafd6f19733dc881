// ISA-generic bodies of the cpu_fast kernels. Included only by fast_<isa>.cc, inside that file's
// target-pragma region and after it defines the vector traits `V` (see fast_avx512.cc for the
// members). Everything here has internal linkage, so no code compiled for one ISA can be picked
// by the linker for another.
//
// Two paths:
//   GEMV (M <= V::kGemvMaxM): each thread streams whole column tiles once; codes are decoded in
//     registers (shift + mask-or -> f = 1 + code/2^SB) and FMA'd into per-group accumulators A;
//     y += scale * (A - zero * X_g) with X_g the group's sum of x.
//   GEMM: x is packed into row panels once; for each block of column tiles and each K slice the
//     weights are dequantized once into an f32 panel in L1/L2 and reused by a register-blocked
//     kMR x 32 FMA microkernel across all M rows.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "core/thread_pool.h"
#include "kernels/cpu/activation_prep.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/dense_layout.h"
#include "kernels/cpu/wna16_layout.h"

namespace qlm {
namespace {

template <int N, class Fn>
inline void static_for(Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (fn(std::integral_constant<int, I>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

using VF = V::F;
using VI = V::I;
constexpr int kLanes = V::kLanes;
constexpr int kCV = 2;                              // vectors per column slab
constexpr int kSlabCols = kCV * kLanes;             // 32 (avx512) or 16 (avx2)
constexpr int kSlabs = kTileN / kSlabCols;          // slabs per tile
constexpr int kTileVecs = kTileN / kLanes;          // vectors per tile row
static_assert(kTileN % kSlabCols == 0);

// Tiles per thread chunk such that a chunk has at least ~2^18 multiply-adds: tiny layers run on
// one thread instead of paying a wake-up.
inline int64_t tile_grain(int64_t M, int64_t rows) {
  const int64_t per_tile = M * rows * kTileN;
  return per_tile >= (int64_t{1} << 18) ? 1 : ((int64_t{1} << 18) + per_tile - 1) / per_tile;
}

// Software prefetch distance along a tile's code stream (words of kTileN u32 = 128 bytes each).
constexpr int64_t kPrefetchWords = 32;

inline int clamp_cols(int64_t n) { return n < 0 ? 0 : (n > kLanes ? kLanes : static_cast<int>(n)); }

// Decodes field J of every lane into 1 + code / 2^SB.
template <int SB, int J>
inline VF decode_field(VI word, VI mask, VI magic) {
  return V::mask_or(V::template shift<23 - SB - SB * J>(word), mask, magic);
}
template <int SB>
inline VI field_mask() { return V::set1i(((1u << SB) - 1u) << (23 - SB)); }
inline VI float_one() { return V::set1i(0x3F800000u); }

// Stores v (+ bias) to the first `cols` of dst; cols in [0, kLanes].
inline void store_cols(float* dst, VF v, const float* bias, int cols) {
  if (cols <= 0) return;
  if (cols == kLanes) {
    if (bias) v = V::add(v, V::load(bias));
    V::store(dst, v);
  } else {
    if (bias) v = V::add(v, V::load_n(bias, cols));
    V::store_n(dst, v, cols);
  }
}

// ---------------------------------------------------------------- WNA16 GEMV

// Rows r of xg are R consecutive activation rows (row stride ldx, packed-row order); xs holds their
// group sums (stride ldxs), already multiplied by sym_zero when there are no zero points.
template <int SB, int R>
void wna16_gemv_tile(const PackedWna16& p, int64_t t, const float* xg, int64_t ldx, const float* xs, int64_t ldxs,
                     float* y, int64_t ldy, const float* bias) {
  constexpr int F = 32 / SB;
  constexpr int S = R == 1 ? 2 : 1;  // independent FMA chains per accumulator
  const VI mask = field_mask<SB>(), magic = float_one();
  for (int slab = 0; slab < kSlabs; ++slab) {
    const int col0 = slab * kSlabCols;
    const uint32_t* codes = p.codes.data() + t * p.words * kTileN + col0;
    const float* sc = p.scales.data() + t * p.groups * kTileN + col0;
    const float* zf = p.has_zeros ? p.zeros.data() + t * p.groups * kTileN + col0 : nullptr;
    // y lives in L1 between groups, leaving the registers to the R x kCV x S accumulators.
    alignas(64) float ybuf[R][kSlabCols] = {};
    for (int64_t g = 0; g < p.groups; ++g) {
      VF acc[R][kCV][S];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < kCV; ++v)
          for (int s = 0; s < S; ++s) acc[r][v][s] = V::zero();
      const int64_t w_end = p.group_words[g + 1];
      for (int64_t w = p.group_words[g]; w < w_end; ++w) {
        __builtin_prefetch(codes + (w + kPrefetchWords) * kTileN, 0, 0);
        VI c[kCV];
        for (int v = 0; v < kCV; ++v) c[v] = V::loadi(codes + w * kTileN + v * kLanes);
        const float* xw = xg + w * F;
        static_for<F>([&](auto J) {
          for (int v = 0; v < kCV; ++v) {
            const VF f = decode_field<SB, J>(c[v], mask, magic);
            for (int r = 0; r < R; ++r)
              acc[r][v][J % S] = V::fma(V::bcast(xw + r * ldx + J), f, acc[r][v][J % S]);
          }
        });
      }
      for (int r = 0; r < R; ++r) {
        const VF sum = V::set1(xs[r * ldxs + g]);
        for (int v = 0; v < kCV; ++v) {
          const VF a = S == 2 ? V::add(acc[r][v][0], acc[r][v][S - 1]) : acc[r][v][0];
          const VF scale = V::load(sc + g * kTileN + v * kLanes);
          const VF centred = zf ? V::fnma(V::load(zf + g * kTileN + v * kLanes), sum, a) : V::sub(a, sum);
          V::store(&ybuf[r][v * kLanes], V::fma(scale, centred, V::load(&ybuf[r][v * kLanes])));
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kCV; ++v) {
        const int64_t n0 = t * kTileN + col0 + v * kLanes;
        store_cols(y + r * ldy + n0, V::load(&ybuf[r][v * kLanes]), bias ? bias + n0 : nullptr,
                   clamp_cols(p.N - n0));
      }
  }
}

template <int SB>
void wna16_gemv_rows(const PackedWna16& p, int64_t t, const float* xg, int64_t ldx, const float* xs, int64_t rows,
                     float* y, const float* bias) {
  for (int64_t m0 = 0; m0 < rows; m0 += V::kGemvRows) {
    const int64_t h = rows - m0 < V::kGemvRows ? rows - m0 : V::kGemvRows;
    const float* xr = xg + m0 * ldx;
    const float* sr = xs + m0 * p.groups;
    float* yr = y + m0 * p.N;
    static_for<V::kGemvRows>([&](auto I) {
      if (h == I + 1) wna16_gemv_tile<SB, I + 1>(p, t, xr, ldx, sr, p.groups, yr, p.N, bias);
    });
  }
}

// ---------------------------------------------------------------- GEMM machinery

// acc[MR x kSlabCols] over kc; a is [kc][MR], b is [kc][kTileN] (this slab's columns at offset 0).
template <int MR>
void microkernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols, bool accumulate,
                 const float* bias) {
  VF acc[MR][kCV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < kCV; ++v) acc[i][v] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    VF bv[kCV];
    for (int v = 0; v < kCV; ++v) bv[v] = V::load(b + k * kTileN + v * kLanes);
    for (int i = 0; i < MR; ++i) {
      const VF av = V::bcast(a + k * MR + i);
      for (int v = 0; v < kCV; ++v) acc[i][v] = V::fma(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < kCV; ++v) {
      const int n = clamp_cols(cols - v * kLanes);
      if (n == 0) continue;
      float* dst = c + i * ldc + v * kLanes;
      VF out = acc[i][v];
      if (accumulate) out = V::add(out, n == kLanes ? V::load(dst) : V::load_n(dst, n));
      store_cols(dst, out, bias ? bias + v * kLanes : nullptr, n);
    }
}

using MicroFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, bool, const float*);
template <int... I>
constexpr std::array<MicroFn, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
  return {&microkernel<I + 1>...};
}
constexpr auto kMicro = micro_table(std::make_integer_sequence<int, V::kMR>{});

// Panel(t, pc, kc, scratch) -> const float* [kc][kTileN]: rows pc .. pc+kc of column tile t in f32.
// ap holds the row panels of pack_row_panels (mr = V::kMR) over `rows` packed rows.
template <class Panel>
void gemm(int64_t M, int64_t rows, int64_t N, int64_t tiles, const float* ap, const Panel& panel, float* y,
          const float* bias, ThreadPool& pool) {
  // With many rows, a block of tiles shares each K slice of x from L2; with few, one tile per task
  // keeps every thread's weight stream sequential.
  const int64_t tiles_per_block = M > 4 * V::kMR ? 4 : 1;
  const int64_t blocks = (tiles + tiles_per_block - 1) / tiles_per_block;
  pool.run(blocks, [&](int64_t blk) {
    thread_local AlignedBuffer<float> scratch;
    float* bp = scratch.reserve(4 * V::kKC * kTileN);
    const int64_t t0 = blk * tiles_per_block;
    const int64_t t1 = t0 + tiles_per_block < tiles ? t0 + tiles_per_block : tiles;
    for (int64_t pc = 0; pc < rows; pc += V::kKC) {
      const int64_t kc = rows - pc < V::kKC ? rows - pc : V::kKC;
      const bool last = pc + kc >= rows;
      for (int64_t t = t0; t < t1; ++t) {
        const float* b = panel(t, pc, kc, bp + (t - t0) * V::kKC * kTileN);
        for (int slab = 0; slab < kSlabs; ++slab) {
          const int64_t n0 = t * kTileN + slab * kSlabCols;
          if (n0 >= N) break;
          const int cols = N - n0 < kSlabCols ? static_cast<int>(N - n0) : kSlabCols;
          for (int64_t m0 = 0; m0 < M; m0 += V::kMR) {
            const int64_t h = M - m0 < V::kMR ? M - m0 : V::kMR;
            kMicro[h - 1](kc, ap + m0 * rows + pc * h, b + slab * kSlabCols, y + m0 * N + n0, N, cols, pc > 0,
                          last && bias ? bias + n0 : nullptr);
          }
        }
      }
    }
  });
}

// Dequantizes rows pc .. pc+kc (whole words) of tile t into out [kc][kTileN].
template <int SB>
const float* wna16_panel(const PackedWna16& p, int64_t t, int64_t pc, int64_t kc, float* out) {
  constexpr int F = 32 / SB;
  const VI mask = field_mask<SB>(), magic = float_one();
  const VF sym_zero = V::set1(p.sym_zero);
  const int64_t w0 = pc / F, w1 = (pc + kc) / F;
  const uint32_t* codes = p.codes.data() + t * p.words * kTileN;
  int64_t group = -1;
  VF sc[kTileVecs], zf[kTileVecs];
  for (int v = 0; v < kTileVecs; ++v) sc[v] = zf[v] = V::zero();
  for (int64_t w = w0; w < w1; ++w) {
    __builtin_prefetch(codes + (w + kPrefetchWords) * kTileN, 0, 0);
    __builtin_prefetch(codes + (w + kPrefetchWords) * kTileN + 16, 0, 0);
    if (p.word_group[w] != group) {
      group = p.word_group[w];
      const int64_t base = (t * p.groups + group) * kTileN;
      for (int v = 0; v < kTileVecs; ++v) {
        sc[v] = V::load(p.scales.data() + base + v * kLanes);
        zf[v] = p.has_zeros ? V::load(p.zeros.data() + base + v * kLanes) : sym_zero;
      }
    }
    VI c[kTileVecs];
    for (int v = 0; v < kTileVecs; ++v) c[v] = V::loadi(codes + w * kTileN + v * kLanes);
    float* dst = out + (w - w0) * F * kTileN;
    static_for<F>([&](auto J) {
      for (int v = 0; v < kTileVecs; ++v)
        V::store(dst + J * kTileN + v * kLanes, V::mul(V::sub(decode_field<SB, J>(c[v], mask, magic), zf[v]), sc[v]));
    });
  }
  return out;
}

// ---------------------------------------------------------------- WNA16 entry

template <int SB>
void wna16_run_sb(const PackedWna16& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool) {
  thread_local AlignedBuffer<float> xbuf, sbuf;
  const int32_t* source = p.row_source.empty() ? nullptr : p.row_source.data();
  if (M <= V::kGemvMaxM) {
    const float* xg = x;
    int64_t ldx = p.K;
    if (source) {
      float* g = xbuf.reserve(static_cast<size_t>(M * p.rows));
      gather_columns(x, M, p.K, p.rows, source, g);
      xg = g;
      ldx = p.rows;
    }
    float* sums = sbuf.reserve(static_cast<size_t>(M * p.groups));
    group_sums(xg, M, ldx, p.group_words.data(), p.groups, 32 / SB, p.has_zeros ? 1.0f : p.sym_zero,
               sums);
    pool.parallel_for(0, p.tiles, tile_grain(M, p.rows), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) wna16_gemv_rows<SB>(p, t, xg, ldx, sums, M, y, bias);
    });
    return;
  }
  float* ap = xbuf.reserve(static_cast<size_t>(M * p.rows));
  pack_row_panels(x, M, p.K, p.rows, source, V::kMR, ap, pool);
  gemm(M, p.rows, p.N, p.tiles, ap,
       [&](int64_t t, int64_t pc, int64_t kc, float* out) { return wna16_panel<SB>(p, t, pc, kc, out); }, y, bias,
       pool);
}

void wna16_run(const PackedWna16& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool) {
  if (M <= 0) return;
  switch (p.storage_bits) {
    case 2: return wna16_run_sb<2>(p, x, M, y, bias, pool);
    case 4: return wna16_run_sb<4>(p, x, M, y, bias, pool);
    case 8: return wna16_run_sb<8>(p, x, M, y, bias, pool);
  }
  QLM_CHECK(false && "storage bits");
}

// ---------------------------------------------------------------- memory read

float read_sum(const float* data, size_t count) {
  constexpr size_t kStep = 4 * kLanes;
  VF acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  size_t i = 0;
  for (; i + kStep <= count; i += kStep)
    for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::load(data + i + u * kLanes));
  alignas(64) float lanes[kLanes];
  V::store(lanes, V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  for (; i < count; ++i) s += data[i];
  return s;
}

// ---------------------------------------------------------------- dense

template <DType DT>
inline VF load_weights(const PackedDense& p, size_t offset) {
  if constexpr (DT == DType::F32)
    return V::load(p.f32.data() + offset);
  else if constexpr (DT == DType::BF16)
    return V::load_bf16(p.u16.data() + offset);
  else
    return V::load_f16(p.u16.data() + offset);
}

template <DType DT, int R>
void dense_gemv_tile(const PackedDense& p, int64_t t, const float* x, float* y, const float* bias) {
  constexpr int S = R == 1 ? 2 : 1;
  for (int slab = 0; slab < kSlabs; ++slab) {
    const int col0 = slab * kSlabCols;
    VF acc[R][kCV][S];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kCV; ++v)
        for (int s = 0; s < S; ++s) acc[r][v][s] = V::zero();
    const size_t base = static_cast<size_t>(t * p.K * kTileN + col0);
    int64_t k = 0;
    for (; k + S <= p.K; k += S) {
      static_for<S>([&](auto J) {
        for (int v = 0; v < kCV; ++v) {
          const VF w = load_weights<DT>(p, base + (k + J) * kTileN + v * kLanes);
          for (int r = 0; r < R; ++r) acc[r][v][J] = V::fma(V::bcast(x + r * p.K + k + J), w, acc[r][v][J]);
        }
      });
    }
    for (; k < p.K; ++k)
      for (int v = 0; v < kCV; ++v) {
        const VF w = load_weights<DT>(p, base + k * kTileN + v * kLanes);
        for (int r = 0; r < R; ++r) acc[r][v][0] = V::fma(V::bcast(x + r * p.K + k), w, acc[r][v][0]);
      }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kCV; ++v) {
        const VF sum = S == 2 ? V::add(acc[r][v][0], acc[r][v][S - 1]) : acc[r][v][0];
        const int64_t n0 = t * kTileN + col0 + v * kLanes;
        store_cols(y + r * p.N + n0, sum, bias ? bias + n0 : nullptr, clamp_cols(p.N - n0));
      }
  }
}

template <DType DT>
const float* dense_panel(const PackedDense& p, int64_t t, int64_t pc, int64_t kc, float* out) {
  const size_t base = static_cast<size_t>((t * p.K + pc) * kTileN);
  if constexpr (DT == DType::F32) {
    return p.f32.data() + base;
  } else {
    for (int64_t k = 0; k < kc; ++k)
      for (int v = 0; v < kTileVecs; ++v)
        V::store(out + k * kTileN + v * kLanes, load_weights<DT>(p, base + k * kTileN + v * kLanes));
    return out;
  }
}

template <DType DT>
void dense_run_dt(const PackedDense& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool) {
  if (M <= V::kGemvMaxM) {
    pool.parallel_for(0, p.tiles, tile_grain(M, p.K), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t m0 = 0; m0 < M; m0 += V::kGemvRows) {
          const int64_t h = M - m0 < V::kGemvRows ? M - m0 : V::kGemvRows;
          static_for<V::kGemvRows>([&](auto I) {
            if (h == I + 1) dense_gemv_tile<DT, I + 1>(p, t, x + m0 * p.K, y + m0 * p.N, bias);
          });
        }
    });
    return;
  }
  thread_local AlignedBuffer<float> abuf;
  float* ap = abuf.reserve(static_cast<size_t>(M * p.K));
  pack_row_panels(x, M, p.K, p.K, nullptr, V::kMR, ap, pool);
  gemm(M, p.K, p.N, p.tiles, ap,
       [&](int64_t t, int64_t pc, int64_t kc, float* out) { return dense_panel<DT>(p, t, pc, kc, out); }, y, bias,
       pool);
}

void dense_run(const PackedDense& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool) {
  if (M <= 0) return;
  if (p.K == 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < p.N; ++n) y[m * p.N + n] = bias ? bias[n] : 0.0f;
    return;
  }
  // pack_dense admits only these three float types.
  if (p.dtype == DType::F32) return dense_run_dt<DType::F32>(p, x, M, y, bias, pool);
  if (p.dtype == DType::BF16) return dense_run_dt<DType::BF16>(p, x, M, y, bias, pool);
  if (p.dtype == DType::F16) return dense_run_dt<DType::F16>(p, x, M, y, bias, pool);
  QLM_CHECK(false && "dense dtype");
}

}  // namespace
}  // namespace qlm
