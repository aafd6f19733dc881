// The integer GEMV of cpu_fast_avx512_vnni (wna16_vnni.h), compiled for AVX-512 F/BW/DQ/VL + VNNI.
// Only called after cpu_features().avx512_vnni.
#include "kernels/cpu/wna16_vnni.h"

#if defined(__x86_64__)

// Headers with inline or template code come before the target region (isa_target.h).
#include <immintrin.h>

#include <atomic>
#include <cfloat>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa_target.h"

QLM_ISA_AVX512_WARNINGS_OFF
QLM_ISA_TARGET_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma")

namespace qlm {
namespace {

constexpr int kLanes = 16;
constexpr int kVecs = kTileN / kLanes;  // 2 vectors of 16 columns per tile
static_assert(kTileN == 2 * kLanes);
constexpr int kRowsPerPass = 2;         // 2 rows x 2 vectors x 3 limbs: 12 accumulators (GCC spills at 4 rows)
constexpr int64_t kPrefetchWords = 32;  // as the float GEMV: 4 KiB ahead in a tile's code stream
constexpr int64_t kRowBlock = 64;       // rows whose limbs stay cached while all tiles stream (3 B per row and k)

template <int N, class Fn>
inline void static_for(Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (fn(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

inline void store_cols(float* dst, __m512 v, const float* bias, int64_t cols) {
  if (cols <= 0) return;
  const auto mask = static_cast<__mmask16>(cols >= kLanes ? 0xFFFFu : (1u << cols) - 1u);
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  _mm512_mask_storeu_ps(dst, mask, v);
}

// Rows m0 .. m0+R-1 of column tile t.
template <int SB, int R>
void vnni_tile(const PackedWna16& p, int64_t t, const LimbActivations& a, int64_t m0, float* y, const float* bias) {
  constexpr int U = 8 / SB;
  const __m512i byte_mask = _mm512_set1_epi32(SB == 8 ? 0 : static_cast<int>(0x01010101u * ((1u << SB) - 1u)));
  const uint32_t* codes = p.codes.data() + t * p.words * kTileN;
  const float* sc = p.scales.data() + t * p.groups * kTileN;
  const float* zf = p.has_zeros ? p.zeros.data() + t * p.groups * kTileN : nullptr;
  // The integer zero point z = (zero - 1) * 2^SB, exact (zero = 1 + z / 2^SB in the layout).
  const __m512 two_sb = _mm512_set1_ps(static_cast<float>(1 << SB)), one = _mm512_set1_ps(1.0f);
  const __m512i sym_z = _mm512_set1_epi32(static_cast<int>((p.sym_zero - 1.0f) * static_cast<float>(1 << SB)));
  const __m512 inv_base = _mm512_set1_ps(1.0f / kVnniLimbBase);
  const __m512 inv_base2 = _mm512_set1_ps(1.0f / (kVnniLimbBase * kVnniLimbBase));
  const int32_t* xq[R][kVnniLimbs];
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < kVnniLimbs; ++l) xq[r][l] = a.limbs.data() + ((m0 + r) * kVnniLimbs + l) * p.words * U;

  // y lives in L1 between groups, leaving the registers to the R x kVecs x kVnniLimbs accumulators.
  alignas(64) float ybuf[R][kTileN] = {};
  for (int64_t g = 0; g < p.groups; ++g) {
    __m512i acc[R][kVecs][kVnniLimbs];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVecs; ++v)
        for (int l = 0; l < kVnniLimbs; ++l) acc[r][v][l] = _mm512_setzero_si512();
    const int64_t w_end = p.group_words[g + 1];
    for (int64_t w = p.group_words[g]; w < w_end; ++w) {
      __builtin_prefetch(codes + (w + kPrefetchWords) * kTileN, 0, 0);
      __builtin_prefetch(codes + (w + kPrefetchWords) * kTileN + kLanes, 0, 0);
      __m512i c[kVecs];
      for (int v = 0; v < kVecs; ++v) c[v] = _mm512_loadu_si512(codes + w * kTileN + v * kLanes);
      for (int u = 0; u < U; ++u) {
        __m512i bytes[kVecs];
        for (int v = 0; v < kVecs; ++v)
          bytes[v] = SB == 8 ? c[v] : _mm512_and_si512(_mm512_srli_epi32(c[v], SB * u), byte_mask);
        for (int r = 0; r < R; ++r) {
          for (int l = 0; l < kVnniLimbs; ++l) {
            const __m512i xb = _mm512_set1_epi32(xq[r][l][w * U + u]);
            for (int v = 0; v < kVecs; ++v) acc[r][v][l] = _mm512_dpbusd_epi32(acc[r][v][l], bytes[v], xb);
          }
        }
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      const __m512i z = zf ? _mm512_cvtps_epi32(_mm512_mul_ps(
                                 _mm512_sub_ps(_mm512_loadu_ps(zf + g * kTileN + v * kLanes), one), two_sb))
                           : sym_z;
      const __m512 scale = _mm512_loadu_ps(sc + g * kTileN + v * kLanes);
      for (int r = 0; r < R; ++r) {
        const int64_t row_group = (m0 + r) * p.groups + g;
        const int32_t* sums = a.sums.data() + row_group * kVnniLimbs;
        __m512 d[kVnniLimbs];
        for (int l = 0; l < kVnniLimbs; ++l)
          d[l] = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][v][l], _mm512_mullo_epi32(z, _mm512_set1_epi32(sums[l]))));
        const __m512 comb = _mm512_fmadd_ps(d[2], inv_base2, _mm512_fmadd_ps(d[1], inv_base, d[0]));
        const __m512 s = _mm512_mul_ps(scale, _mm512_set1_ps(a.scales[static_cast<size_t>(row_group)]));
        float* yb = &ybuf[r][v * kLanes];
        _mm512_store_ps(yb, _mm512_fmadd_ps(s, comb, _mm512_load_ps(yb)));
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) {
      const int64_t n0 = t * kTileN + v * kLanes;
      store_cols(y + (m0 + r) * p.N + n0, _mm512_load_ps(&ybuf[r][v * kLanes]), bias ? bias + n0 : nullptr, p.N - n0);
    }
}

// Byte permutation of 16 packed rows (16 / F whole words) from row order into the limb layout's
// (word, u, b) order: output byte o of a word is field U * (o % 4) + o / 4.
__m128i limb_permutation(int F, int U) {
  alignas(16) int8_t table[16];
  for (int o = 0; o < 16; ++o) table[o] = static_cast<int8_t>((o / F) * F + U * ((o % F) % 4) + (o % F) / 4);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(table));
}

inline __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u); }

// Row m of split_activation_limbs into buffers sized by LimbActivations::reserve.
bool split_row(const PackedWna16& p, const float* x, int64_t m, LimbActivations& out) {
  const int F = p.fields, U = 8 / p.storage_bits;
  const int32_t* source = p.row_source.empty() ? nullptr : p.row_source.data();
  auto* limbs = reinterpret_cast<int8_t*>(out.limbs.data());
  float* scales = out.scales.data();
  int32_t* sums = out.sums.data();
  thread_local AlignedBuffer<float> gathered;
  const float two_minus_sb = 1.0f / static_cast<float>(1 << p.storage_bits);
  const __m128i perm = limb_permutation(F, U);
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF)), flt_max = _mm512_set1_ps(FLT_MAX);
  const __m512d base = _mm512_set1_pd(kVnniLimbBase);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  {
    const float* xr = x + m * p.K;
    if (source) {  // act-order or padded groups: packed rows in order first
      float* g = gathered.reserve(static_cast<size_t>(p.rows));
      for (int64_t r = 0; r < p.rows; ++r) g[r] = source[r] >= 0 ? xr[source[r]] : 0.0f;
      xr = g;
    }
    for (int64_t g = 0; g < p.groups; ++g) {
      const int64_t r0 = p.group_words[g] * F, r1 = p.group_words[g + 1] * F;
      __m512 vmax = _mm512_setzero_ps();
      bool finite = true;
      for (int64_t r = r0; r < r1; r += 16) {
        const __mmask16 lanes = first_lanes(r1 - r);
        const __m512 a = _mm512_and_ps(_mm512_maskz_loadu_ps(lanes, xr + r), abs_mask);
        finite &= _mm512_cmp_ps_mask(a, flt_max, _CMP_LE_OQ) == 0xFFFF;  // NaN compares false
        vmax = _mm512_max_ps(vmax, a);
      }
      if (!finite) return false;
      const float amax = _mm512_reduce_max_ps(vmax);
      const float s = static_cast<float>(amax / 127.0);
      if (amax > 0.0f && s * two_minus_sb < FLT_MIN) return false;
      scales[m * p.groups + g] = s * two_minus_sb;
      const __m512d inv = _mm512_set1_pd(amax > 0.0f ? 1.0 / static_cast<double>(s) : 0.0);
      __m512i sum[kVnniLimbs] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int64_t r = r0; r < r1; r += 16) {  // r1 - r is a whole number of words: the permutation stays inside
        const __mmask16 lanes = first_lanes(r1 - r);
        const __m512 v = _mm512_maskz_loadu_ps(lanes, xr + r);
        __m512d q[2] = {
            _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), inv),
            _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), inv)};
        for (int l = 0; l < kVnniLimbs; ++l) {
          const __m512d d0 = _mm512_roundscale_pd(q[0], kNearest), d1 = _mm512_roundscale_pd(q[1], kNearest);
          const __m512i digits =
              _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(d0)), _mm512_cvtpd_epi32(d1), 1);
          sum[l] = _mm512_add_epi32(sum[l], digits);
          const __m128i bytes = _mm_shuffle_epi8(_mm512_cvtepi32_epi8(digits), perm);
          _mm_mask_storeu_epi8(limbs + ((m * kVnniLimbs + l) * p.words * U) * 4 + r, lanes, bytes);
          q[0] = _mm512_mul_pd(_mm512_sub_pd(q[0], d0), base);
          q[1] = _mm512_mul_pd(_mm512_sub_pd(q[1], d1), base);
        }
      }
      for (int l = 0; l < kVnniLimbs; ++l) sums[(m * p.groups + g) * kVnniLimbs + l] = _mm512_reduce_add_epi32(sum[l]);
    }
  }
  return true;
}

// Rows [m_begin, m_end) of column tiles [t0, t1).
template <int SB>
void vnni_tiles(const PackedWna16& p, const LimbActivations& a, int64_t t0, int64_t t1, int64_t m_begin, int64_t m_end,
                float* y, const float* bias) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kRowsPerPass) {
      const int64_t h = m_end - m0 < kRowsPerPass ? m_end - m0 : kRowsPerPass;
      static_for<kRowsPerPass>([&](auto I) {
        if (h == I + 1) vnni_tile<SB, I + 1>(p, t, a, m0, y, bias);
      });
    }
}

}  // namespace

bool split_activation_limbs_avx512(const PackedWna16& p, const float* x, int64_t M, LimbActivations& out) {
  out.reserve(p, M);
  for (int64_t m = 0; m < M; ++m)
    if (!split_row(p, x, m, out)) return false;
  return true;
}

bool wna16_vnni_gemv(const PackedWna16& p, const float* x, int64_t M, float* y, const float* bias, ThreadPool& pool) {
  if (M <= 0) return true;
  thread_local LimbActivations scratch;
  LimbActivations& acts = scratch;  // the workers read the caller's buffers, not their own thread_local
  acts.reserve(p, M);
  std::atomic<bool> ok{true};
  pool.parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1 && ok.load(std::memory_order_relaxed); ++m)
      if (!split_row(p, x, m, acts)) ok.store(false, std::memory_order_relaxed);
  });
  if (!ok.load()) return false;
  // Row blocks keep their limbs in the caches while every tile's codes stream past them once per block;
  // inside a block, at least ~2^18 multiply-adds per chunk (tiny layers stay on one thread).
  for (int64_t m_begin = 0; m_begin < M; m_begin += kRowBlock) {
    const int64_t m_end = M - m_begin < kRowBlock ? M : m_begin + kRowBlock;
    const int64_t per_tile = (m_end - m_begin) * p.rows * kTileN;
    const int64_t grain = per_tile >= (int64_t{1} << 18) ? 1 : ((int64_t{1} << 18) + per_tile - 1) / per_tile;
    pool.parallel_for(0, p.tiles, grain, [&](int64_t t0, int64_t t1) {
      switch (p.storage_bits) {
        case 2: return vnni_tiles<2>(p, acts, t0, t1, m_begin, m_end, y, bias);
        case 4: return vnni_tiles<4>(p, acts, t0, t1, m_begin, m_end, y, bias);
        case 8: return vnni_tiles<8>(p, acts, t0, t1, m_begin, m_end, y, bias);
      }
    });
  }
  return true;
}

}  // namespace qlm

QLM_ISA_TARGET_END

#else
namespace qlm {
bool wna16_vnni_gemv(const PackedWna16&, const float*, int64_t, float*, const float*, ThreadPool&) { return false; }
bool split_activation_limbs_avx512(const PackedWna16&, const float*, int64_t, LimbActivations&) { return false; }
}  // namespace qlm
#endif
