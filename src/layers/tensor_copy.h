// Element copies and comparisons between tensors of equal shape and dtype with any strides
// (narrowed views of parameters and of memory-mapped checkpoint tensors).
#pragma once

#include "core/tensor.h"

namespace qlm {

// dst <- src element-wise. Shapes and dtypes must be equal; dst may be a narrowed view.
void copy_elements(Tensor& dst, const Tensor& src);
// Whether every element of a and b has identical bytes (shapes and dtypes must be equal).
bool bytes_equal(const Tensor& a, const Tensor& b);
// Whether every element is zero (floats: +0 or -0; integers: 0).
bool all_zero(const Tensor& t);

}  // namespace qlm
