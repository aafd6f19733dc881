// Bit packing of integer weight codes (FORMATS.md §3, §11.1). Fields are little-endian inside a
// 32-bit word: field i occupies bits [i*b, (i+1)*b). 3-bit packs 32 values into 3 words across word
// boundaries. Every function here is bit-exact and tested over every code value.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace qlm {

// ---- sequential packing along one dimension (GPTQ qweight/qzeros, compressed-tensors) ----

// Packs codes [rows, cols] (row-major, each < 2^bits) along dim 0: result I32 [ceil(rows*bits/32), cols].
// GPTQ qweight layout (rows = K). Rows beyond `rows` in the last word are zero.
Tensor pack_rows(std::span<const uint8_t> codes, int64_t rows, int64_t cols, int bits);
// Inverse: I32 [packed_rows, cols] -> codes [rows, cols].
std::vector<uint8_t> unpack_rows(const Tensor& packed, int64_t rows, int bits);
// Packs codes [rows, cols] along dim 1: result I32 [rows, ceil(cols*bits/32)]
// (GPTQ qzeros, compressed-tensors weight_packed).
Tensor pack_cols(std::span<const uint8_t> codes, int64_t rows, int64_t cols, int bits);
std::vector<uint8_t> unpack_cols(const Tensor& packed, int64_t cols, int bits);

// ---- AWQ GEMM: 4-bit along N, interleaved [0,2,4,6,1,3,5,7] ----
Tensor awq_pack(std::span<const uint8_t> codes, int64_t rows, int64_t cols);  // -> I32 [rows, cols/8]
std::vector<uint8_t> awq_unpack(const Tensor& packed, int64_t cols);          // -> codes [rows, cols]

// ---- direct conversions into the GPTQ layout (what the generic unpack + repack give, without the
// byte-per-code intermediate; used while loading, so they run on the compute threads) ----

// compressed-tensors weight_packed I32 [rows, packed_len(cols, bits)] (fields along dim 1) ->
// I32 [packed_len(cols, bits), rows] (fields along dim 0), for bits 2, 4 or 8 (no field straddles a
// word, so a word carries the same fields either way: a transpose of words). Fields past `cols` in the
// last word are cleared. Equals pack_rows(transpose(unpack_cols(packed, cols, bits))).
Tensor cols_to_rows_packed(const Tensor& packed, int64_t cols, int bits);
// AWQ qweight I32 [rows, cols/8] -> GPTQ layout I32 [packed_len(rows, 4), cols]. Equals
// pack_rows(awq_unpack(packed, cols), rows, cols, 4).
Tensor awq_to_rows_packed(const Tensor& packed, int64_t cols);

// Code of one element from a sequentially packed I32 tensor along dim 0 (3-bit aware), for the
// reference kernel and checks: field `row` of column `col`.
uint32_t packed_row_field(const int32_t* packed, int64_t cols, int64_t row, int64_t col, int bits);

}  // namespace qlm
