#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/float_convert.h"

namespace qlm {
namespace {

Tensor iota_tensor(Shape shape) {
  Tensor t = Tensor::empty(shape, DType::F32);
  auto s = t.span<float>();
  std::iota(s.begin(), s.end(), 0.0f);
  return t;
}

TEST(Tensor, ContiguousStridesAndSizes) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::BF16);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "BF16[2, 3, 4]");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, ScalarAndEmpty) {
  Tensor s = Tensor::zeros({}, DType::F32);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.dim(), 0);
  Tensor e = Tensor::zeros({0, 5}, DType::F16);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_EQ(e.clone().numel(), 0);
}

TEST(Tensor, NarrowSharesStorageAndSlicesRows) {
  Tensor t = iota_tensor({6, 4});
  Tensor rows = t.narrow(0, 2, 3);
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.data<float>()[0], 8.0f);
  rows.data<float>()[0] = -1.0f;
  EXPECT_EQ(t.data<float>()[8], -1.0f);  // a view, not a copy
}

TEST(Tensor, NarrowColumnsIsStridedAndCloneCompacts) {
  Tensor t = iota_tensor({3, 5});
  Tensor cols = t.narrow(1, 1, 2);
  EXPECT_FALSE(cols.is_contiguous());
  Tensor c = cols.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_float_vector(), (std::vector<float>{1, 2, 6, 7, 11, 12}));
  EXPECT_EQ(cols.to_float_vector(), c.to_float_vector());
}

TEST(Tensor, NarrowOutOfRangeIsAnError) {
  Tensor t = iota_tensor({4, 4});
  EXPECT_THROW(t.narrow(0, 3, 2), Error);
  EXPECT_THROW(t.narrow(2, 0, 1), Error);
  EXPECT_THROW(t.narrow(0, -1, 1), Error);
  try {
    t.narrow(1, 2, 5);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "tensor.narrow");
    EXPECT_NE(std::string(e.what()).find("F32[4, 4]"), std::string::npos);
  }
}

TEST(Tensor, TransposeAndView) {
  Tensor t = iota_tensor({2, 3});
  Tensor tt = t.transpose();
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.contiguous().to_float_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.view({3, 2}).shape(), (Shape{3, 2}));
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(tt.view({6}), Error);  // not contiguous
}

TEST(Tensor, ConversionsAreExact) {
  Tensor t = Tensor::from_vector<float>({1.0f, -2.5f, 65504.0f, 1e-8f}, {4});
  Tensor h = t.to(DType::F16);
  EXPECT_EQ(h.data<uint16_t>()[2], 0x7bff);
  Tensor b = t.to(DType::BF16);
  EXPECT_EQ(b.data<uint16_t>()[0], f32_to_bf16(1.0f));
  Tensor back = h.to(DType::F32);
  EXPECT_EQ(back.data<float>()[1], -2.5f);
  Tensor f8 = t.to(DType::F8_E4M3);
  EXPECT_EQ(e4m3_to_f32(f8.data<uint8_t>()[2]), 448.0f);  // saturates
}

// Widening every F16 and BF16 bit pattern to F32 (the contiguous fast path, and a strided view through
// the generic one) gives the exact value: the same bits as the scalar conversion, NaN as NaN.
TEST(Tensor, WideningEvery16BitPatternIsExact) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor t = Tensor::from_vector(all, {256, 256}, dt);
    const Tensor wide = t.to(DType::F32);
    const Tensor strided = t.transpose().to(DType::F32);  // non-contiguous: the generic path
    for (uint32_t i = 0; i < 65536; ++i) {
      const float want =
          dt == DType::F16 ? f16_to_f32(static_cast<uint16_t>(i)) : bf16_to_f32(static_cast<uint16_t>(i));
      const float got = wide.data<float>()[i];
      const float got_t = strided.data<float>()[(i % 256) * 256 + i / 256];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got) && std::isnan(got_t)) << dtype_name(dt) << " " << i;
      } else {
        ASSERT_EQ(f32_bits(got), f32_bits(want)) << dtype_name(dt) << " " << i;
        ASSERT_EQ(f32_bits(got_t), f32_bits(want)) << dtype_name(dt) << " " << i;
      }
    }
  }
}

TEST(Tensor, TypedAccessChecksDtype) {
  Tensor t = Tensor::zeros({2}, DType::F16);
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_NO_THROW(t.data<uint16_t>());  // raw bits of a same-width dtype
  EXPECT_THROW(t.data<uint32_t>(), Error);
}

TEST(Tensor, BorrowRejectsMisalignedPointers) {
  alignas(8) unsigned char buf[16] = {};
  auto owner = std::make_shared<int>(0);
  EXPECT_NO_THROW(Tensor::borrow(buf, {2}, DType::F32, owner));
  EXPECT_THROW(Tensor::borrow(buf + 1, {2}, DType::F32, owner), Error);
  Tensor t = Tensor::borrow(buf + 1, {3}, DType::U8, owner);  // bytes are always aligned
  EXPECT_TRUE(t.is_borrowed());
}

TEST(Tensor, ShapeOverflowIsAnError) {
  EXPECT_THROW(shape_numel({1LL << 40, 1LL << 40}), Error);
  EXPECT_THROW(shape_numel({-1, 2}), Error);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kDTypeCount; ++i) {
    auto d = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_FALSE(dtype_from_name("f16").has_value());
  EXPECT_FALSE(dtype_from_name("F128").has_value());
  EXPECT_EQ(dtype_bits(DType::F4), 4);
  EXPECT_THROW(dtype_size(DType::F6_E2M3), Error);
  EXPECT_EQ(kUint4b8.name(), "uint4b8");
  EXPECT_EQ(kUint8.name(), "uint8");
  EXPECT_EQ(kUint4.pack_factor(), 8);
}

}  // namespace
}  // namespace qlm
