// copy_elements on copies large enough to be split over the compute threads (>= 8 MiB), into whole
// tensors and into narrowed views (a shard's columns, a shard's rows), against an element loop.
#include "layers/tensor_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace qlm {
namespace {

Tensor counting(int64_t rows, int64_t cols, int32_t offset) {
  std::vector<int32_t> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i) * 7 + offset;
  return Tensor::from_vector(v, {rows, cols});
}

TEST(TensorCopy, LargeCopiesIntoWholeAndNarrowedTensorsMatchAnElementLoop) {
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    const int64_t rows = 1031, cols = 4099;  // 16.9 MB of int32: the split path
    const Tensor src = counting(rows, cols, 3);

    Tensor whole = Tensor::zeros({rows, cols}, DType::I32);
    copy_elements(whole, src);
    EXPECT_TRUE(bytes_equal(whole, src));

    // A shard's columns: the source lands in columns [100, 100 + cols) of a wider parameter.
    Tensor wide = Tensor::zeros({rows, cols + 300}, DType::I32);
    Tensor cols_view = wide.narrow(1, 100, cols);
    copy_elements(cols_view, src);
    const int32_t* w = wide.data<int32_t>();
    const int32_t* s = src.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols + 300; ++c) {
        const int32_t want = c >= 100 && c < 100 + cols ? s[r * cols + c - 100] : 0;
        ASSERT_EQ(w[r * (cols + 300) + c], want) << "threads=" << threads << " r=" << r << " c=" << c;
      }

    // A shard's rows, from a narrowed source.
    Tensor tall = Tensor::zeros({rows + 50, cols}, DType::I32);
    Tensor rows_view = tall.narrow(0, 50, rows - 20);
    copy_elements(rows_view, src.narrow(0, 20, rows - 20));
    const int32_t* t = tall.data<int32_t>();
    for (int64_t r = 0; r < rows + 50; ++r)
      for (int64_t c = 0; c < cols; c += 97) {
        const int32_t want = r >= 50 && r < 50 + rows - 20 ? s[(r - 50 + 20) * cols + c] : 0;
        ASSERT_EQ(t[r * cols + c], want) << "threads=" << threads << " r=" << r << " c=" << c;
      }
  }
  set_compute_threads(0);
}

// A source with more rows than the destination is a shape mismatch on the split path too, not a prefix.
TEST(TensorCopy, LargeCopyRejectsASourceOfAnotherShape) {
  set_compute_threads(2);
  Tensor dst = Tensor::zeros({1024, 4096}, DType::I32);  // 16 MiB: the split path
  EXPECT_THROW(copy_elements(dst, counting(1030, 4096, 0)), Error);
  EXPECT_THROW(copy_elements(dst, Tensor::zeros({1024, 4096}, DType::F32)), Error);
  set_compute_threads(0);
}

}  // namespace
}  // namespace qlm
