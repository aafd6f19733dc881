#include "layers/tensor_copy.h"

#include <cstring>

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
  std::byte* d = dst.raw_data();
  const std::byte* s = src.raw_data();
  for_each_row(dst, src, [&](size_t od, size_t os, size_t n) { std::memmove(d + od, s + os, n); });
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
