#include "quant/packing.h"

#include <algorithm>
#include <array>

#include "core/thread_pool.h"

namespace qlm {
namespace {

// Fields form one little-endian bit stream per packed line: field i starts at bit i*bits of the
// line (word i*bits/32, bit i*bits%32). For 2/4/8 bits no field straddles a word; for 3 bits this
// is exactly GPTQ's "10-1-10-1-10" layout (FORMATS.md §3.2): v10 takes bits 30-31 of word 0 and
// bit 0 of word 1, v21 bit 31 of word 1 and bits 0-1 of word 2.
void check_bits(int bits, const char* what) {
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    fail("packing.bits", {}, "use 2, 3, 4 or 8 bits", "{}: unsupported bit width {}", what, bits);
}

int64_t packed_len(int64_t n, int bits) { return (n * bits + 31) / 32; }

// `words` is the line's first word; consecutive words of the line are `stride` apart.
inline uint32_t read_field(const uint32_t* words, int64_t stride, int64_t index, int bits) {
  int64_t bit = index * bits;
  int64_t w = bit / 32;
  int shift = static_cast<int>(bit % 32);
  uint64_t v = words[w * stride] >> shift;
  if (shift + bits > 32) v |= static_cast<uint64_t>(words[(w + 1) * stride]) << (32 - shift);
  return static_cast<uint32_t>(v) & ((1u << bits) - 1u);
}

inline void write_field(uint32_t* words, int64_t stride, int64_t index, int bits, uint32_t code) {
  int64_t bit = index * bits;
  int64_t w = bit / 32;
  int shift = static_cast<int>(bit % 32);
  words[w * stride] |= code << shift;
  if (shift + bits > 32) words[(w + 1) * stride] |= code >> (32 - shift);
}

void check_codes(std::span<const uint8_t> codes, int64_t rows, int64_t cols, int bits, const char* what) {
  if (rows < 0 || cols < 0 || static_cast<int64_t>(codes.size()) != rows * cols)
    fail("packing.shape", {}, "", "{}: {} codes for a [{}, {}] matrix", what, codes.size(), rows, cols);
  const uint32_t mask = (1u << bits) - 1u;
  for (size_t i = 0; i < codes.size(); ++i)
    if (codes[i] > mask)
      fail("packing.code_range", {}, "", "{}: code {} at index {} does not fit {} bits", what, codes[i], i, bits);
}

Tensor contiguous_i32(const Tensor& packed, const char* what) {
  if (packed.dtype() != DType::I32 || packed.dim() != 2)
    fail("packing.dtype", {}, "", "{}: expected a 2-D I32 tensor, found {}", what, packed.str());
  return packed.contiguous();
}

constexpr std::array<int, 8> kAwqOrder = {0, 2, 4, 6, 1, 3, 5, 7};  // field i holds column kAwqOrder[i]

}  // namespace

Tensor pack_rows(std::span<const uint8_t> codes, int64_t rows, int64_t cols, int bits) {
  check_bits(bits, "pack_rows");
  check_codes(codes, rows, cols, bits, "pack_rows");
  Tensor out = Tensor::zeros({packed_len(rows, bits), cols}, DType::I32);
  auto* words = reinterpret_cast<uint32_t*>(out.data<int32_t>());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) write_field(words + c, cols, r, bits, codes[r * cols + c]);
  return out;
}

std::vector<uint8_t> unpack_rows(const Tensor& packed, int64_t rows, int bits) {
  check_bits(bits, "unpack_rows");
  Tensor p = contiguous_i32(packed, "unpack_rows");
  const int64_t cols = p.size(1);
  if (p.size(0) != packed_len(rows, bits))
    fail("packing.shape", {}, "", "unpack_rows: {} packed rows cannot hold exactly {} rows of {} bits (expected {})",
         p.size(0), rows, bits, packed_len(rows, bits));
  const auto* words = reinterpret_cast<const uint32_t*>(p.data<int32_t>());
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) codes[r * cols + c] = static_cast<uint8_t>(read_field(words + c, cols, r, bits));
  return codes;
}

Tensor pack_cols(std::span<const uint8_t> codes, int64_t rows, int64_t cols, int bits) {
  check_bits(bits, "pack_cols");
  check_codes(codes, rows, cols, bits, "pack_cols");
  const int64_t pc = packed_len(cols, bits);
  Tensor out = Tensor::zeros({rows, pc}, DType::I32);
  auto* words = reinterpret_cast<uint32_t*>(out.data<int32_t>());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) write_field(words + r * pc, 1, c, bits, codes[r * cols + c]);
  return out;
}

std::vector<uint8_t> unpack_cols(const Tensor& packed, int64_t cols, int bits) {
  check_bits(bits, "unpack_cols");
  Tensor p = contiguous_i32(packed, "unpack_cols");
  const int64_t rows = p.size(0), pc = p.size(1);
  if (pc != packed_len(cols, bits))
    fail("packing.shape", {}, "",
         "unpack_cols: {} packed columns cannot hold exactly {} columns of {} bits (expected {})", pc, cols, bits,
         packed_len(cols, bits));
  const auto* words = reinterpret_cast<const uint32_t*>(p.data<int32_t>());
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      codes[r * cols + c] = static_cast<uint8_t>(read_field(words + r * pc, 1, c, bits));
  return codes;
}

Tensor awq_pack(std::span<const uint8_t> codes, int64_t rows, int64_t cols) {
  check_codes(codes, rows, cols, 4, "awq_pack");
  if (cols % 8 != 0) fail("packing.shape", {}, "", "awq_pack: {} columns is not a multiple of 8", cols);
  Tensor out = Tensor::zeros({rows, cols / 8}, DType::I32);
  auto* words = reinterpret_cast<uint32_t*>(out.data<int32_t>());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < cols / 8; ++w) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= static_cast<uint32_t>(codes[r * cols + w * 8 + kAwqOrder[i]]) << (4 * i);
      words[r * (cols / 8) + w] = word;
    }
  return out;
}

std::vector<uint8_t> awq_unpack(const Tensor& packed, int64_t cols) {
  Tensor p = contiguous_i32(packed, "awq_unpack");
  const int64_t rows = p.size(0);
  if (cols % 8 != 0 || p.size(1) != cols / 8)
    fail("packing.shape", {}, "", "awq_unpack: {} cannot hold exactly {} interleaved 4-bit columns", p.str(), cols);
  const auto* words = reinterpret_cast<const uint32_t*>(p.data<int32_t>());
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < cols / 8; ++w) {
      uint32_t word = words[r * (cols / 8) + w];
      for (int i = 0; i < 8; ++i)
        codes[r * cols + w * 8 + kAwqOrder[i]] = static_cast<uint8_t>((word >> (4 * i)) & 15u);
    }
  return codes;
}

Tensor cols_to_rows_packed(const Tensor& packed, int64_t cols, int bits) {
  if (bits != 2 && bits != 4 && bits != 8)
    fail("packing.bits", {}, "use the generic unpack_cols + pack_rows for 3-bit fields",
         "cols_to_rows_packed: {}-bit fields straddle words", bits);
  Tensor p = contiguous_i32(packed, "cols_to_rows_packed");
  const int64_t rows = p.size(0), pc = p.size(1);
  if (pc != packed_len(cols, bits))
    fail("packing.shape", {}, "",
         "cols_to_rows_packed: {} packed columns cannot hold exactly {} columns of {} bits (expected {})", pc, cols,
         bits, packed_len(cols, bits));
  Tensor out = Tensor::empty({pc, rows}, DType::I32);
  const auto* in = reinterpret_cast<const uint32_t*>(p.data<int32_t>());
  auto* o = reinterpret_cast<uint32_t*>(out.data<int32_t>());
  const int64_t tail = (cols * bits) % 32;  // used bits of the last word (0: all)
  const uint32_t last_mask = tail == 0 ? ~0u : (1u << tail) - 1u;
  // 32 x 32 word blocks: both sides stay in cache lines while the block is transposed.
  constexpr int64_t kB = 32;
  compute_pool().parallel_for(0, (pc + kB - 1) / kB, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t w0 = b0 * kB; w0 < std::min(pc, b1 * kB); w0 += kB)
      for (int64_t r0 = 0; r0 < rows; r0 += kB)
        for (int64_t w = w0; w < std::min(pc, w0 + kB); ++w) {
          const uint32_t mask = w == pc - 1 ? last_mask : ~0u;
          for (int64_t r = r0; r < std::min(rows, r0 + kB); ++r) o[w * rows + r] = in[r * pc + w] & mask;
        }
  });
  return out;
}

Tensor awq_to_rows_packed(const Tensor& packed, int64_t cols) {
  Tensor p = contiguous_i32(packed, "awq_to_rows_packed");
  const int64_t rows = p.size(0);
  if (cols % 8 != 0 || p.size(1) != cols / 8)
    fail("packing.shape", {}, "", "awq_to_rows_packed: {} cannot hold exactly {} interleaved 4-bit columns", p.str(),
         cols);
  const int64_t row_words = packed_len(rows, 4), in_words = cols / 8;
  Tensor out = Tensor::empty({row_words, cols}, DType::I32);
  const auto* in = reinterpret_cast<const uint32_t*>(p.data<int32_t>());
  auto* o = reinterpret_cast<uint32_t*>(out.data<int32_t>());
  // Output word (kw, column) holds rows 8 kw .. 8 kw + 7 of the column: an 8 x 8 nibble transpose of
  // the AWQ words of those rows, field i of an AWQ word being column kAwqOrder[i] of its 8.
  compute_pool().parallel_for(0, row_words, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t kw = k0; kw < k1; ++kw) {
      const int nr = static_cast<int>(std::min<int64_t>(8, rows - kw * 8));
      for (int64_t cw = 0; cw < in_words; ++cw) {
        uint32_t col_word[8] = {};
        for (int j = 0; j < nr; ++j) {
          const uint32_t word = in[(kw * 8 + j) * in_words + cw];
          for (int i = 0; i < 8; ++i) col_word[kAwqOrder[i]] |= ((word >> (4 * i)) & 15u) << (4 * j);
        }
        std::copy(col_word, col_word + 8, o + kw * cols + cw * 8);
      }
    }
  });
  return out;
}

uint32_t packed_row_field(const int32_t* packed, int64_t cols, int64_t row, int64_t col, int bits) {
  return read_field(reinterpret_cast<const uint32_t*>(packed) + col, cols, row, bits);
}

}  // namespace qlm
