// INT8 W8A8 with AVX-512 VNNI. vpdpbusd multiplies unsigned by signed bytes, so activation codes
// are offset to u8 (q + 128, one XOR with 0x80) and the offset is taken back in the epilogue with
// the column sums: sum_k (q + 128) w = sum_k q w + 128 colsum[n]. Only called after
// cpu_features().avx512_vnni.
//
// Layout: 64-column panels; panel p holds, for every group of 4 k, 4 tiles of 16 columns x 4 bytes
// (one zmm per tile): byte [(k/4)*256 + t*64 + j*4 + k%4] = W[p*64 + t*16 + j, k].
#include "core/thread_pool.h"
#include "kernels/cpu/scaled_mm_int8.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/isa_target.h"

QLM_ISA_AVX512_WARNINGS_OFF
QLM_ISA_TARGET_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma")

namespace qlm {
namespace {

constexpr int64_t kPanel = 64;
constexpr int kMR = 6;
constexpr int64_t kKC4 = 512;      // k groups of 4 per cache block: a 64 x 2048 panel block (128 KiB)
constexpr int64_t kRowChunk = 96;  // rows per scratch block (multiple of kMR)

void pack(const int8_t* codes, Int8Packed& p) {
  const int64_t K4 = p.K_pad / 4, panels = p.N_pad / kPanel;
  p.w.resize(static_cast<size_t>(p.N_pad * p.K_pad));
  int8_t* out = p.w.data();
  std::memset(out, 0, p.w.bytes());
  // Panels in parallel; a column's codes move in groups of 4 (one int32 per 256-byte k group).
  compute_pool().parallel_for(0, panels, 1, [&](int64_t pn0, int64_t pn1) {
    for (int64_t pn = pn0; pn < pn1; ++pn)
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t n = pn * kPanel + c;
        if (n >= p.N) continue;
        const int8_t* row = codes + n * p.K;
        int8_t* base = out + pn * K4 * 256 + (c / 16) * 64 + (c % 16) * 4;
        const int64_t whole = p.K / 4;
        for (int64_t k4 = 0; k4 < whole; ++k4) std::memcpy(base + k4 * 256, row + 4 * k4, 4);
        for (int64_t k = 4 * whole; k < p.K; ++k) base[(k / 4) * 256 + k % 4] = row[k];
      }
  });
}

template <int R>
void micro(const int8_t* w, int64_t k4n, const int8_t* x, int64_t ldx, int32_t* c, bool first) {
  __m512i acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < 4; ++t)
      acc[r][t] = first ? _mm512_setzero_si512() : _mm512_loadu_si512(c + r * kPanel + t * 16);
  const __m512i flip = _mm512_set1_epi32(static_cast<int>(0x80808080u));
  for (int64_t k4 = 0; k4 < k4n; ++k4) {
    const int8_t* wk = w + k4 * 256;
    const __m512i w0 = _mm512_load_si512(wk), w1 = _mm512_load_si512(wk + 64);
    const __m512i w2 = _mm512_load_si512(wk + 128), w3 = _mm512_load_si512(wk + 192);
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, x + r * ldx + 4 * k4, 4);
      const __m512i a = _mm512_xor_si512(_mm512_set1_epi32(four), flip);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, w0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, w1);
      acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], a, w2);
      acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], a, w3);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < 4; ++t) _mm512_storeu_si512(c + r * kPanel + t * 16, acc[r][t]);
}

void micro_rows(int rows, const int8_t* w, int64_t k4n, const int8_t* x, int64_t ldx, int32_t* c, bool first) {
  switch (rows) {
    case 1: return micro<1>(w, k4n, x, ldx, c, first);
    case 2: return micro<2>(w, k4n, x, ldx, c, first);
    case 3: return micro<3>(w, k4n, x, ldx, c, first);
    case 4: return micro<4>(w, k4n, x, ldx, c, first);
    case 5: return micro<5>(w, k4n, x, ldx, c, first);
    case 6: return micro<6>(w, k4n, x, ldx, c, first);
    default: return;
  }
}

void epilogue(const Int8Packed& p, const int32_t* c, int64_t m0, int64_t rows, int64_t n0, const Int8Epilogue& e) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = m0 + r;
    const __m512i offset = _mm512_set1_epi32(128 + e.row_zp[m]);
    const __m512 rs = _mm512_set1_ps(e.row_scale[m]);
    for (int t = 0; t < 4; ++t) {
      const int64_t n = n0 + t * 16;
      if (n >= e.N) break;
      const __m512i acc = _mm512_loadu_si512(c + r * kPanel + t * 16);
      const __m512i cs = _mm512_loadu_si512(p.colsum.data() + n);
      const __m512i exact = _mm512_sub_epi32(acc, _mm512_mullo_epi32(offset, cs));
      __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(exact), rs), _mm512_loadu_ps(p.col_scale.data() + n));
      if (e.bias) v = _mm512_add_ps(v, _mm512_loadu_ps(e.bias + n));
      const int64_t left = std::min<int64_t>(16, e.N - n);
      _mm512_mask_storeu_ps(e.y + m * e.N + n, static_cast<__mmask16>((1u << left) - 1u), v);
    }
  }
}

void gemm(const Int8Packed& p, const int8_t* xq, int64_t ldx, int64_t m0, int64_t m1, int64_t p0, int64_t p1,
          const Int8Epilogue& e, int32_t* scratch) {
  const int64_t K4 = p.K_pad / 4;
  for (int64_t pn = p0; pn < p1; ++pn) {
    const int8_t* panel = p.w.data() + pn * K4 * 256;
    for (int64_t r0 = m0; r0 < m1; r0 += kRowChunk) {
      const int64_t r1 = std::min(m1, r0 + kRowChunk);
      for (int64_t kb = 0; kb < K4; kb += kKC4) {
        const int64_t k4n = std::min(kKC4, K4 - kb);
        for (int64_t r = r0; r < r1; r += kMR) {
          const int rows = static_cast<int>(std::min<int64_t>(kMR, r1 - r));
          micro_rows(rows, panel + kb * 256, k4n, xq + r * ldx + kb * 4, ldx, scratch + (r - r0) * kPanel, kb == 0);
        }
      }
      epilogue(p, scratch, r0, r1 - r0, pn * kPanel, e);
    }
  }
}

const Int8ScaledOps kOps{"avx512_vnni", 4, kPanel, &pack, &gemm, kRowChunk* kPanel};

}  // namespace
}  // namespace qlm

QLM_ISA_TARGET_END

const qlm::Int8ScaledOps* qlm::int8_scaled_avx512_vnni_ops() { return &kOps; }

#else
namespace qlm {
const Int8ScaledOps* int8_scaled_avx512_vnni_ops() { return nullptr; }
}  // namespace qlm
#endif
