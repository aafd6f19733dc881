// Weight quantizers shared by online quantization (at load time) and `qlm quantize` (offline), so
// that both give identical codes and scales for the same weights.
//
//   fp8 per-tensor:   s = absmax(W) / 448,   q = e4m3(clamp(w * (1/s), -448, 448))   (vLLM scaled_fp8_quant)
//   fp8 per-channel:  the same per output row
//   int8 per-channel: s = absmax(row) / 127, q = clamp(rne(w / s), -127, 127)       (symmetric)
// An all-zero matrix or row gets scale 1 (codes 0), so every scale is positive.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/scaled_mm.h"

namespace qlm {

enum class OnlineQuant : uint8_t;

struct QuantizedMatrix {
  Tensor codes;   // [N, K] F8_E4M3 or I8
  Tensor scales;  // F32 [1] (per tensor) or [N] (per channel)
};

// W: [N, K] F32 / F16 / BF16.
QuantizedMatrix online_quantize(const Tensor& w, OnlineQuant how);
// fp8 per-tensor with a given scale (offline fused groups share one scale: the largest part's).
Tensor fp8_quantize_with_scale(const Tensor& w, float scale);
float fp8_tensor_scale(float absmax);
float absmax_of(const Tensor& w);

// Rows [row0, row0 + rows) of `codes`, dequantized with `from` and requantized with `to`
// (FORMATS.md §6: q' = e4m3(clamp(q * from * (1/to))), int8: rne).
void requantize_rows(Tensor& codes, int64_t row0, int64_t rows, float from, float to, W8Type type);

}  // namespace qlm
