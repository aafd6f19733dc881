#include "kernels/cpu/dense_layout.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/kernel_args.h"

namespace qlm {

namespace {

// dst [tiles][K][kTileN] from src [N][K] (columns past N zero). Blocks of 256 k: each of a tile's rows
// is read in 256-element runs while the block's 256 x kTileN outputs (16-32 KiB) stay in L1 / L2.
template <typename T>
void pack_tiles(const T* src, const PackedDense& p, T* dst) {
  constexpr int64_t kKBlock = 256;
  compute_pool().parallel_for(0, p.tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t cols = std::min<int64_t>(kTileN, p.N - t * kTileN);
      T* tile = dst + t * p.K * kTileN;
      for (int64_t k0 = 0; k0 < p.K; k0 += kKBlock) {
        const int64_t k1 = std::min(p.K, k0 + kKBlock);
        for (int64_t c = 0; c < cols; ++c) {
          const T* row = src + (t * kTileN + c) * p.K;
          for (int64_t k = k0; k < k1; ++k) tile[k * kTileN + c] = row[k];
        }
        for (int64_t k = k0; k < k1; ++k) std::fill(tile + k * kTileN + cols, tile + (k + 1) * kTileN, T{});
      }
    }
  });
}

}  // namespace

PackedDense pack_dense(const Tensor& weight) {
  if (!weight.defined() || weight.dim() != 2 || !weight.device().is_cpu() ||
      (weight.dtype() != DType::F32 && weight.dtype() != DType::BF16 && weight.dtype() != DType::F16))
    fail("kernel.weights", tensor_context("weight"), "", "dense weight must be a 2-D CPU F32/BF16/F16 tensor, got {}",
         weight.defined() ? weight.str() : std::string("undefined"));
  PackedDense p;
  p.dtype = weight.dtype();
  p.N = weight.size(0);
  p.K = weight.size(1);
  p.tiles = (p.N + kTileN - 1) / kTileN;
  const Tensor w = weight.contiguous();
  const size_t count = static_cast<size_t>(p.tiles * p.K * kTileN);
  if (p.dtype == DType::F32) {
    p.f32.resize(count);
    pack_tiles(w.data<float>(), p, p.f32.data());
  } else {
    p.u16.resize(count);
    pack_tiles(reinterpret_cast<const uint16_t*>(w.raw_data()), p, p.u16.data());
  }
  return p;
}

}  // namespace qlm
