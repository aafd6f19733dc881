// Run-time kernel variant -> template instantiation for the `cuda_wna16_fast` kernel families
// (wna16_fast_kernels.cu, wna16_tiled_kernels.cu, wna16_stream_kernels.cu): each is instantiated for
// 4- and 8-bit codes, BF16 and F16 activations, a family-specific list of m-tile counts, and with or
// without zero points.
#pragma once

namespace qlm::cuda {

// One instantiation's compile-time parameters, passed to the dispatched callable as a tag.
template <int B, bool H, int T, bool Z>
struct Wna16Variant {
  static constexpr int kBits = B;
  static constexpr bool kBf16 = H;
  static constexpr int kMt = T;
  static constexpr bool kZp = Z;
};

namespace detail {

template <int B, bool H, bool Z, int... MTs, typename F, typename R>
bool wna16_try(int bits, bool bf16, int mt, bool zp, F& f, R& result) {
  if (bits != B || bf16 != H || zp != Z) return false;
  return ((mt == MTs ? (result = f(Wna16Variant<B, H, MTs, Z>{}), true) : false) || ...);
}

}  // namespace detail

// Returns f(Wna16Variant<BITS, BF16, MT, ZP>{}) for the instantiation matching the run-time values
// (a generic lambda: `[&](auto v) { using V = decltype(v); return kernel<V::kBits, ...>(...); }`), MT
// taken from MTs; `unmatched` when none does (callers check their arguments first, so
// that is a bug, reported through the value: an error code, zero occupancy, "not usable").
template <int... MTs, typename F, typename R>
R wna16_dispatch(int bits, bool bf16, int mt, bool zp, F&& f, R unmatched) {
  R result = unmatched;
  (void)(detail::wna16_try<4, true, false, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<4, true, true, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<4, false, false, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<4, false, true, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<8, true, false, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<8, true, true, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<8, false, false, MTs...>(bits, bf16, mt, zp, f, result) ||
         detail::wna16_try<8, false, true, MTs...>(bits, bf16, mt, zp, f, result));
  return result;
}

}  // namespace qlm::cuda
