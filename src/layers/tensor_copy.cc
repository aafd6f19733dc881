#include "layers/tensor_copy.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"

namespace qlm {
namespace {

// Calls fn(byte offset in a, byte offset in b, bytes) for each innermost row of two tensors of the
// same shape; rows are merged into one call when both are contiguous along the last dim.
template <typename Fn>
void for_each_row(const Tensor& a, const Tensor& b, Fn&& fn) {
  QLM_CHECK(a.shape() == b.shape());
  QLM_CHECK(a.dtype() == b.dtype());
  const Shape& shape = a.shape();
  if (a.numel() == 0) return;
  const size_t elem = dtype_size(a.dtype());
  if (a.is_contiguous() && b.is_contiguous()) {
    fn(0, 0, static_cast<size_t>(a.numel()) * elem);
    return;
  }
  const size_t nd = shape.size();
  if (nd == 0) {
    fn(0, 0, elem);
    return;
  }
  const int64_t inner = shape[nd - 1];
  const bool rows_contiguous = a.strides()[nd - 1] == 1 && b.strides()[nd - 1] == 1;
  std::vector<int64_t> idx(nd - 1, 0);
  const int64_t outer = a.numel() / inner;
  for (int64_t i = 0; i < outer; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d + 1 < nd; ++d) {
      oa += idx[d] * a.strides()[d];
      ob += idx[d] * b.strides()[d];
    }
    if (rows_contiguous) {
      fn(static_cast<size_t>(oa) * elem, static_cast<size_t>(ob) * elem, static_cast<size_t>(inner) * elem);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        fn(static_cast<size_t>(oa + j * a.strides()[nd - 1]) * elem,
           static_cast<size_t>(ob + j * b.strides()[nd - 1]) * elem, elem);
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void copy_elements(Tensor& dst, const Tensor& src) {
  // Checked before the split below narrows both sides: a source with more rows must not pass as its prefix.
  QLM_CHECK(dst.shape() == src.shape());
  QLM_CHECK(dst.dtype() == src.dtype());
  auto copy = [](Tensor& d, const Tensor& s) {
    std::byte* dp = d.raw_data();
    const std::byte* sp = s.raw_data();
    for_each_row(d, s, [&](size_t od, size_t os, size_t n) { std::memmove(dp + od, sp + os, n); });
  };
  // Large copies (checkpoint tensors into fresh parameters, whole or as a shard's rows) are split over
  // the compute threads along the first dimension, so the copy and the first touch of the destination's
  // pages (the kernel zeroing them) run in parallel.
  constexpr int64_t kParallelBytes = int64_t{8} << 20;
  const int64_t bytes = dst.numel() * static_cast<int64_t>(dtype_size(dst.dtype()));
  if (bytes >= kParallelBytes && dst.dim() >= 1 && dst.size(0) >= 2 && dst.on_host() && src.on_host()) {
    const int64_t rows = dst.size(0);
    const int64_t grain = std::max<int64_t>(1, rows * (int64_t{2} << 20) / bytes);  // >= 2 MiB per chunk
    compute_pool().parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      Tensor d = dst.narrow(0, r0, r1 - r0);
      copy(d, src.narrow(0, r0, r1 - r0));
    });
    return;
  }
  copy(dst, src);
}

bool bytes_equal(const Tensor& a, const Tensor& b) {
  const std::byte* pa = a.raw_data();
  const std::byte* pb = b.raw_data();
  bool equal = true;
  for_each_row(a, b, [&](size_t oa, size_t ob, size_t n) {
    if (equal && std::memcmp(pa + oa, pb + ob, n) != 0) equal = false;
  });
  return equal;
}

bool all_zero(const Tensor& t) {
  if (dtype_info(t.dtype()).is_float) {
    for (float v : t.to_float_vector())
      if (v != 0.0f) return false;
    return true;
  }
  Tensor c = t.contiguous();
  const std::byte* p = c.raw_data();
  for (size_t i = 0; i < c.nbytes(); ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

}  // namespace qlm
