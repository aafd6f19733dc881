// cpu_fast kernels compiled for AVX2 + FMA + F16C. Only called after cpu_features().avx2_fma.
#include "kernels/cpu/cpu_fast.h"

#if defined(__x86_64__)

// Every header with inline or template code is included before the target region (isa_target.h), so only the
// functions defined below (all with internal linkage) carry AVX2 code.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/activation_prep.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/isa_target.h"

QLM_ISA_TARGET_BEGIN("avx2,fma,f16c,bmi2")

namespace qlm {
namespace {

alignas(32) constexpr int32_t kLaneMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

struct V {
  using F = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kMR = 6;        // microkernel rows: 12 accumulators of 16 registers
  static constexpr int64_t kKC = 256;  // K slice: a 256 x 16 f32 slab (16 KiB) stays in L1
  static constexpr int kGemvRows = 4;  // 8 accumulators
  static constexpr int kGemvMaxM = 4;

  static I mask(int n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMaskTable + 8 - n)); }
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static F set1(float f) { return _mm256_set1_ps(f); }
  static F bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b
  static I loadi(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I set1i(uint32_t u) { return _mm256_set1_epi32(static_cast<int>(u)); }
  template <int S>
  static I shift(I v) {
    if constexpr (S > 0)
      return _mm256_slli_epi32(v, S);
    else if constexpr (S < 0)
      return _mm256_srli_epi32(v, -S);
    else
      return v;
  }
  static F mask_or(I v, I mask, I bits) {
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(v, mask), bits));
  }
  static F load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};

}  // namespace
}  // namespace qlm

#include "kernels/cpu/cpu_fast_impl.h"

namespace qlm {
namespace {
const CpuFastOps kOps{"avx2", &wna16_run, &dense_run, &read_sum};
}  // namespace
}  // namespace qlm

QLM_ISA_TARGET_END

const qlm::CpuFastOps* qlm::cpu_fast_avx2_ops() { return &kOps; }

#else
namespace qlm {
const CpuFastOps* cpu_fast_avx2_ops() { return nullptr; }
}  // namespace qlm
#endif
