// Rotary position embeddings as Hugging Face transformers computes them (modeling_rope_utils.py):
// inv_freq from rope_theta and the rotary dimension, rescaled by rope_scaling type "linear",
// "dynamic" (NTK, recomputed per forward from the longest position) or "llama3"; applied to the
// first `rotary_dim` features of every head in the non-interleaved (rotate_half) layout.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qlm::ops {

enum class RopeType : uint8_t { Default, Linear, Dynamic, Llama3 };
const char* rope_type_name(RopeType type);

struct RopeParams {
  RopeType type = RopeType::Default;
  double theta = 10000.0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // int(head_dim * partial_rotary_factor), even
  double factor = 1.0;     // linear, dynamic, llama3
  // dynamic: positions beyond this rescale the base.
  int64_t max_position_embeddings = 0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// inv_freq[i], i < rotary_dim / 2, in double. `seq_len` (longest position + 1 of the forward) only
// matters for Dynamic, which uses max(seq_len, max_position_embeddings).
std::vector<double> rope_inv_freq(const RopeParams& params, int64_t seq_len);

// cos/sin of position · inv_freq for a batch of positions: [T, rotary_dim / 2] each.
struct RopeAngles {
  int64_t half = 0;
  std::vector<float> cos, sin;
};
RopeAngles rope_angles(const RopeParams& params, std::span<const int64_t> positions);

// Every position's angles as one decode step at that position computes them (rope_angles of that position alone:
// with dynamic scaling the frequencies depend on the sequence length, so positions past max_position_embeddings
// each get their own): rows [positions, 2·half], row p holding p's cos then its sin (the CUDA decode graph's table).
struct RopeTable {
  int64_t half = 0;
  std::vector<float> rows;
};
RopeTable rope_table(const RopeParams& params, int64_t positions);

// Rotates x[t, h, 0:rotary_dim] in place for every token t and head h; x rows are `row_stride`
// floats apart, heads `head_dim` apart within a row. Features past rotary_dim pass through.
void apply_rope(const RopeAngles& angles, float* x, int64_t tokens, int64_t row_stride, int64_t heads,
                int64_t head_dim);

}  // namespace qlm::ops
