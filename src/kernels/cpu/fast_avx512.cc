// cpu_fast kernels compiled for AVX-512 (F, BW, DQ, VL). Only called after cpu_features().avx512.
#include "kernels/cpu/cpu_fast.h"

#if defined(__x86_64__)

// Every header with inline or template code is included before the target region (isa_target.h), so only the
// functions defined below (all with internal linkage) carry AVX-512 code.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/activation_prep.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/isa_target.h"

QLM_ISA_AVX512_WARNINGS_OFF
QLM_ISA_TARGET_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi2")

namespace qlm {
namespace {

struct V {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16;
  static constexpr int kMR = 14;       // microkernel rows: 28 accumulators of 32 registers
  static constexpr int64_t kKC = 128;  // K slice: a 128 x 32 f32 weight panel (16 KiB) stays in L1
  static constexpr int kGemvRows = 8;  // rows per GEMV pass: 16 accumulators
  static constexpr int kGemvMaxM = 8;  // up to this M the weights are decoded in registers

  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static F set1(float f) { return _mm512_set1_ps(f); }
  static F bcast(const float* p) { return _mm512_set1_ps(*p); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a*b
  static I loadi(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static I set1i(uint32_t u) { return _mm512_set1_epi32(static_cast<int>(u)); }
  template <int S>
  static I shift(I v) {
    if constexpr (S > 0)
      return _mm512_slli_epi32(v, S);
    else if constexpr (S < 0)
      return _mm512_srli_epi32(v, -S);
    else
      return v;
  }
  // (v & mask) | bits in one instruction.
  static F mask_or(I v, I mask, I bits) { return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(v, mask, bits, 0xEA)); }
  static F load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

}  // namespace
}  // namespace qlm

#include "kernels/cpu/cpu_fast_impl.h"

namespace qlm {
namespace {
const CpuFastOps kOps{"avx512", &wna16_run, &dense_run, &read_sum};
}  // namespace
}  // namespace qlm

QLM_ISA_TARGET_END

const qlm::CpuFastOps* qlm::cpu_fast_avx512_ops() { return &kOps; }

#else
namespace qlm {
const CpuFastOps* cpu_fast_avx512_ops() { return nullptr; }
}  // namespace qlm
#endif
