#include "kernels/cpu/dense_layout.h"

#include <cstring>

#include "core/thread_pool.h"
#include "kernels/cpu/kernel_args.h"

namespace qlm {

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
  const bool wide = p.dtype == DType::F32;
  if (wide)
    p.f32.resize(count);
  else
    p.u16.resize(count);
  const std::byte* src = w.raw_data();
  compute_pool().parallel_for(0, p.tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t k = 0; k < p.K; ++k)
        for (int c = 0; c < kTileN; ++c) {
          const int64_t n = t * kTileN + c;
          const size_t out = static_cast<size_t>((t * p.K + k) * kTileN + c);
          if (wide) {
            float v = 0.0f;
            if (n < p.N) std::memcpy(&v, src + (n * p.K + k) * 4, 4);
            p.f32[out] = v;
          } else {
            uint16_t v = 0;
            if (n < p.N) std::memcpy(&v, src + (n * p.K + k) * 2, 2);
            p.u16[out] = v;
          }
        }
  });
  return p;
}

}  // namespace qlm
