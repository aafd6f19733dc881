// INT8 W8A8 with AVX2 (no VNNI): bytes widened to int16 and multiplied with vpmaddwd, which adds
// two exact int16 products into int32 (vpmaddubsw would saturate). Only called after
// cpu_features().avx2_fma.
//
// Layout: 32-column panels; panel p holds, for every pair of k, 4 tiles of 8 columns x 2 bytes:
// byte [(k/2)*64 + t*16 + j*2 + k%2] = W[p*32 + t*8 + j, k].
#include "kernels/cpu/scaled_mm_int8.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/isa_target.h"

QLM_ISA_TARGET_BEGIN("avx2,fma")

namespace qlm {
namespace {

constexpr int64_t kPanel = 32;
constexpr int kMR = 2;
constexpr int64_t kRowChunk = 64;

void pack(const int8_t* codes, Int8Packed& p) {
  const int64_t K2 = p.K_pad / 2, panels = p.N_pad / kPanel;
  p.w.resize(static_cast<size_t>(p.N_pad * p.K_pad));
  int8_t* out = p.w.data();
  std::memset(out, 0, p.w.bytes());
  for (int64_t pn = 0; pn < panels; ++pn)
    for (int64_t c = 0; c < kPanel; ++c) {
      const int64_t n = pn * kPanel + c;
      if (n >= p.N) continue;
      const int8_t* row = codes + n * p.K;
      int8_t* base = out + pn * K2 * 64 + (c / 8) * 16 + (c % 8) * 2;
      for (int64_t k = 0; k < p.K; ++k) base[(k / 2) * 64 + k % 2] = row[k];
    }
}

// Two int8 activations as one int32 holding two sign-extended int16 lanes.
int32_t pair16(const int8_t* x) {
  const uint32_t lo = static_cast<uint16_t>(static_cast<int16_t>(x[0]));
  const uint32_t hi = static_cast<uint16_t>(static_cast<int16_t>(x[1]));
  return static_cast<int32_t>(lo | (hi << 16));
}

template <int R>
void micro(const int8_t* w, int64_t K2, const int8_t* x, int64_t ldx, int32_t* c) {
  __m256i acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < 4; ++t) acc[r][t] = _mm256_setzero_si256();
  for (int64_t k2 = 0; k2 < K2; ++k2) {
    const int8_t* wk = w + k2 * 64;
    __m256i wt[4];
    for (int t = 0; t < 4; ++t)
      wt[t] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wk + t * 16)));
    for (int r = 0; r < R; ++r) {
      const __m256i a = _mm256_set1_epi32(pair16(x + r * ldx + 2 * k2));
      for (int t = 0; t < 4; ++t) acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(wt[t], a));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < 4; ++t) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * kPanel + t * 8), acc[r][t]);
}

void epilogue(const Int8Packed& p, const int32_t* c, int64_t m0, int64_t rows, int64_t n0, const Int8Epilogue& e) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = m0 + r;
    const __m256i zp = _mm256_set1_epi32(e.row_zp[m]);
    const __m256 rs = _mm256_set1_ps(e.row_scale[m]);
    for (int t = 0; t < 4; ++t) {
      const int64_t n = n0 + t * 8;
      if (n >= e.N) break;
      const __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + r * kPanel + t * 8));
      const __m256i cs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.colsum.data() + n));
      const __m256i exact = _mm256_sub_epi32(acc, _mm256_mullo_epi32(zp, cs));
      __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(exact), rs), _mm256_loadu_ps(p.col_scale.data() + n));
      if (e.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(e.bias + n));
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, v);
      std::memcpy(e.y + m * e.N + n, tmp, static_cast<size_t>(std::min<int64_t>(8, e.N - n)) * sizeof(float));
    }
  }
}

void gemm(const Int8Packed& p, const int8_t* xq, int64_t ldx, int64_t m0, int64_t m1, int64_t p0, int64_t p1,
          const Int8Epilogue& e, int32_t* scratch) {
  const int64_t K2 = p.K_pad / 2;
  for (int64_t pn = p0; pn < p1; ++pn) {
    const int8_t* panel = p.w.data() + pn * K2 * 64;
    for (int64_t r0 = m0; r0 < m1; r0 += kRowChunk) {
      const int64_t r1 = std::min(m1, r0 + kRowChunk);
      for (int64_t r = r0; r < r1; r += kMR) {
        int32_t* c = scratch + (r - r0) * kPanel;
        if (r + 1 < r1)
          micro<2>(panel, K2, xq + r * ldx, ldx, c);
        else
          micro<1>(panel, K2, xq + r * ldx, ldx, c);
      }
      epilogue(p, scratch, r0, r1 - r0, pn * kPanel, e);
    }
  }
}

const Int8ScaledOps kOps{"avx2", 2, kPanel, &pack, &gemm, kRowChunk* kPanel};

}  // namespace
}  // namespace qlm

QLM_ISA_TARGET_END

const qlm::Int8ScaledOps* qlm::int8_scaled_avx2_ops() { return &kOps; }

#else
namespace qlm {
const Int8ScaledOps* int8_scaled_avx2_ops() { return nullptr; }
}  // namespace qlm
#endif
