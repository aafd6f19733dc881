// Work that a linear layer's kernel may run inside its own launch once the layer's whole output is written, instead
// of a separate kernel after it: the residual add and RMSNorm that follow o_proj and down_proj in a decoder layer
// (ops::cu::add_rms_norm). A kernel that offers it (MPLinearKernel::run_with_tail) gives bit-for-bit the results of
// the layer followed by add_rms_norm; one that cannot, for the shape or M at hand, runs nothing and says so.
#pragma once

#include <cstdint>

namespace qlm {

// For each output row r of the layer (y[r], N elements, N = the norm's width):
//   residual[r] += y[r]                                      (F32, written back)
//   out[r] = weight ⊙ residual[r] / sqrt(mean(residual[r]²) + eps)   (in the layer's activation type)
// Every pointer is device memory; rows are `*_stride` elements apart; out must not overlap residual or y.
struct AddRmsNormTail {
  float* residual = nullptr;
  int64_t residual_stride = 0;
  const float* weight = nullptr;
  void* out = nullptr;
  int64_t out_stride = 0;
  float eps = 0;
};

// Rows a tail takes: one block of the grid normalizes them one after another, where the standalone kernel gives each
// its own block, so past a decode step's single row the tail loses (session 51, H100, 8B int4 shape: a 16-token
// prefill at 2541 tokens/s with the tail against 4477 without; docs/w4a16-kernel-notes.md).
constexpr int64_t kAddRmsNormTailMaxRows = 1;

// Whether a kernel's tail serves `rows` rows of `dim` elements with these buffers: at most kAddRmsNormTailMaxRows,
// 16-byte rows of the residual and the weights (the 16-byte form of the standalone norm kernel, whose grouping of the
// sums the tails reproduce), 8-byte rows of the output.
inline bool add_rms_norm_tail_fits(const AddRmsNormTail& t, int64_t dim, int64_t rows) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return rows >= 1 && rows <= kAddRmsNormTailMaxRows && t.residual != nullptr && t.weight != nullptr &&
         t.out != nullptr && dim > 0 && dim % 4 == 0 && t.residual_stride % 4 == 0 && t.out_stride % 4 == 0 &&
         aligned(t.residual) && aligned(t.weight) && reinterpret_cast<uintptr_t>(t.out) % 8 == 0;
}

}  // namespace qlm
