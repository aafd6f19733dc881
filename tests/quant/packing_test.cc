// Bit-exact packing tests (FORMATS.md §3.1-3.3, §11.1): every code value of every width, odd
// shapes, and hand-built words for the exact bit positions (3-bit across words, AWQ interleave).
#include "quant/packing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/expect_error.h"

namespace qlm {
namespace {

// Codes cycling through every value of `bits`, offset per column so neighbours differ.
std::vector<uint8_t> all_codes(int64_t rows, int64_t cols, int bits) {
  std::vector<uint8_t> c(static_cast<size_t>(rows * cols));
  const int n = 1 << bits;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) c[r * cols + k] = static_cast<uint8_t>((r * 7 + k * 3 + r * k) % n);
  return c;
}

uint32_t word(const Tensor& t, int64_t r, int64_t c) {
  return static_cast<uint32_t>(t.data<int32_t>()[r * t.size(1) + c]);
}

class PackingBits : public ::testing::TestWithParam<int> {};

TEST_P(PackingBits, RowsRoundTripEveryCodeOddShapes) {
  const int bits = GetParam();
  for (int64_t rows : {1, 31, 32, 33, 67, 96, 257})
    for (int64_t cols : {1, 3, 10}) {
      auto codes = all_codes(rows, cols, bits);
      Tensor p = pack_rows(codes, rows, cols, bits);
      ASSERT_EQ(p.shape(), Shape({(rows * bits + 31) / 32, cols}));
      EXPECT_EQ(unpack_rows(p, rows, bits), codes) << rows << "x" << cols;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(packed_row_field(p.data<int32_t>(), cols, r, c, bits), codes[r * cols + c]);
    }
}

TEST_P(PackingBits, ColsRoundTripEveryCodeOddShapes) {
  const int bits = GetParam();
  for (int64_t rows : {1, 5, 13})
    for (int64_t cols : {1, 31, 32, 33, 100, 257}) {
      auto codes = all_codes(rows, cols, bits);
      Tensor p = pack_cols(codes, rows, cols, bits);
      ASSERT_EQ(p.shape(), Shape({rows, (cols * bits + 31) / 32}));
      EXPECT_EQ(unpack_cols(p, cols, bits), codes) << rows << "x" << cols;
    }
}

TEST_P(PackingBits, EveryCodeInEveryFieldPosition) {
  // Each code value placed alone in each field position of a 32-value run: exactly its bits set,
  // at position i*bits (little-endian bit stream), nothing else.
  const int bits = GetParam();
  for (int code = 0; code < (1 << bits); ++code)
    for (int64_t i = 0; i < 32; ++i) {
      std::vector<uint8_t> codes(32, 0);
      codes[i] = static_cast<uint8_t>(code);
      Tensor p = pack_rows(codes, 32, 1, bits);
      std::vector<uint32_t> expected(static_cast<size_t>(p.size(0)), 0u);
      for (int j = 0; j < bits; ++j)
        if ((code >> j) & 1) {
          const int64_t pos = i * bits + j;
          expected[static_cast<size_t>(pos / 32)] |= 1u << (pos % 32);
        }
      for (int64_t w = 0; w < p.size(0); ++w)
        ASSERT_EQ(word(p, w, 0), expected[static_cast<size_t>(w)])
            << "code " << code << " field " << i << " word " << w;
      Tensor pc = pack_cols(codes, 1, 32, bits);
      for (int64_t w = 0; w < p.size(0); ++w) ASSERT_EQ(word(pc, 0, w), word(p, w, 0));
      ASSERT_EQ(unpack_rows(p, 32, bits), codes);
    }
}

INSTANTIATE_TEST_SUITE_P(Bits, PackingBits, ::testing::Values(2, 3, 4, 8));

TEST(Packing, FourBitWordLayoutByHand) {
  std::vector<uint8_t> codes = {1, 2, 3, 4, 5, 6, 7, 15};  // rows 0..7 of one column
  Tensor p = pack_rows(codes, 8, 1, 4);
  EXPECT_EQ(word(p, 0, 0), 0xF7654321u);
  Tensor z = pack_cols(std::vector<uint8_t>(8, 7), 1, 8, 4);  // symmetric GPTQ v1 qzeros
  EXPECT_EQ(word(z, 0, 0), 0x77777777u);
  Tensor b = pack_cols(std::vector<uint8_t>(4, 127), 1, 4, 8);
  EXPECT_EQ(word(b, 0, 0), 0x7F7F7F7Fu);
  Tensor two = pack_rows(std::vector<uint8_t>{3, 0, 1, 2}, 4, 1, 2);
  EXPECT_EQ(word(two, 0, 0), 0b10'01'00'11u);
}

TEST(Packing, ThreeBitTenOneTenOneTenByHand) {
  // FORMATS.md §3.2: word0 = v0..v9 at 3i + low 2 bits of v10 at 30-31; word1 = bit 2 of v10 at
  // bit 0, v11..v20 at 3i+1, low bit of v21 at 31; word2 = bits 1-2 of v21 at 0-1, v22..v31 at 3i+2.
  std::vector<uint8_t> v(32, 0);
  v[10] = 0b110;  // low two bits 10 -> word0 bits 30-31 = 0b10; bit 2 (1) -> word1 bit 0
  v[21] = 0b011;  // low bit 1 -> word1 bit 31; bits 1-2 = 0b01 -> word2 bits 0-1
  v[0] = 7;
  v[11] = 5;  // word1 bits 1-3
  v[31] = 4;  // word2 bits 29-31
  Tensor p = pack_rows(v, 32, 1, 3);
  ASSERT_EQ(p.shape(), Shape({3, 1}));
  EXPECT_EQ(word(p, 0, 0), (0b10u << 30) | 7u);
  EXPECT_EQ(word(p, 1, 0), 1u | (5u << 1) | (1u << 31));
  EXPECT_EQ(word(p, 2, 0), 0b01u | (4u << 29));
  EXPECT_EQ(unpack_rows(p, 32, 3), v);
  // All ones: every bit of the three words set.
  Tensor ones = pack_rows(std::vector<uint8_t>(32, 7), 32, 1, 3);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(word(ones, w, 0), 0xFFFFFFFFu);
}

TEST(Packing, AwqInterleaveByHand) {
  // Columns c0..c7 = 0..7: word = c0 | c2<<4 | c4<<8 | c6<<12 | c1<<16 | c3<<20 | c5<<24 | c7<<28.
  std::vector<uint8_t> codes = {0, 1, 2, 3, 4, 5, 6, 7};
  Tensor p = awq_pack(codes, 1, 8);
  EXPECT_EQ(word(p, 0, 0), 0x75316420u);
  EXPECT_EQ(awq_unpack(p, 8), codes);
}

TEST(Packing, AwqRoundTripEveryCode) {
  for (int64_t rows : {1, 3, 17})
    for (int64_t cols : {8, 24, 136}) {
      auto codes = all_codes(rows, cols, 4);
      Tensor p = awq_pack(codes, rows, cols);
      ASSERT_EQ(p.shape(), Shape({rows, cols / 8}));
      EXPECT_EQ(awq_unpack(p, cols), codes);
    }
  // Every code in every field position.
  for (int code = 0; code < 16; ++code)
    for (int col = 0; col < 8; ++col) {
      std::vector<uint8_t> c(8, 0);
      c[col] = static_cast<uint8_t>(code);
      const int rev[8] = {0, 4, 1, 5, 2, 6, 3, 7};
      EXPECT_EQ(word(awq_pack(c, 1, 8), 0, 0), static_cast<uint32_t>(code) << (4 * rev[col]));
    }
}

// The loaders' direct conversions give exactly the generic unpack + repack: every code in every field
// position, row counts that leave a partial last word, and (compressed-tensors) garbage in the unused
// fields of a row's last word, which the generic path drops.
TEST(Packing, AwqToRowsPackedEqualsUnpackThenPackRows) {
  for (int64_t rows : {1, 7, 8, 17, 64})
    for (int64_t cols : {8, 24, 136}) {
      SCOPED_TRACE(fmt::format("rows={} cols={}", rows, cols));
      const Tensor p = awq_pack(all_codes(rows, cols, 4), rows, cols);
      const Tensor want = pack_rows(awq_unpack(p, cols), rows, cols, 4);
      const Tensor got = awq_to_rows_packed(p, cols);
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t r = 0; r < want.size(0); ++r)
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(word(got, r, c), word(want, r, c)) << r << " " << c;
    }
  EXPECT_QLM_ERROR(awq_to_rows_packed(Tensor::zeros({2, 3}, DType::I32), 16), "packing.shape", "interleaved");
}

TEST(Packing, ColsToRowsPackedEqualsTransposedRepack) {
  for (int bits : {2, 4, 8})
    for (int64_t rows : {1, 5, 33, 70})
      for (int64_t cols : {1, 7, 16, 35, 100}) {
        SCOPED_TRACE(fmt::format("bits={} rows={} cols={}", bits, rows, cols));
        const auto codes = all_codes(rows, cols, bits);  // [rows, cols], packed along cols
        Tensor p = pack_cols(codes, rows, cols, bits);
        // Unused fields of each row's last word set to ones: they are not codes and must not carry over.
        const int64_t pc = p.size(1), tail = (cols * bits) % 32;
        if (tail != 0)
          for (int64_t r = 0; r < rows; ++r)
            p.data<int32_t>()[r * pc + pc - 1] |= static_cast<int32_t>(~((1u << tail) - 1u));
        std::vector<uint8_t> transposed(codes.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = codes[r * cols + c];
        const Tensor want = pack_rows(transposed, cols, rows, bits);
        const Tensor got = cols_to_rows_packed(p, cols, bits);
        ASSERT_EQ(got.shape(), want.shape());
        for (int64_t w = 0; w < want.size(0); ++w)
          for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(word(got, w, r), word(want, w, r)) << w << " " << r;
      }
  EXPECT_QLM_ERROR(cols_to_rows_packed(Tensor::zeros({2, 3}, DType::I32), 32, 3), "packing.bits", "straddle");
  EXPECT_QLM_ERROR(cols_to_rows_packed(Tensor::zeros({2, 3}, DType::I32), 32, 4), "packing.shape", "expected 4");
}

TEST(Packing, Errors) {
  std::vector<uint8_t> big = {16};
  EXPECT_QLM_ERROR(pack_rows(big, 1, 1, 4), "packing.code_range", "does not fit 4 bits");
  EXPECT_QLM_ERROR(pack_rows(std::vector<uint8_t>{1}, 1, 1, 5), "packing.bits", "unsupported bit width 5");
  EXPECT_QLM_ERROR(awq_pack(std::vector<uint8_t>(4, 0), 1, 4), "packing.shape", "multiple of 8");
  Tensor p = pack_rows(std::vector<uint8_t>(16, 1), 16, 1, 4);
  EXPECT_QLM_ERROR(unpack_rows(p, 32, 4), "packing.shape", "expected 4");
}

}  // namespace
}  // namespace qlm
