// SiLU-gated MLP activation: out[t, i] = silu(gate[t, i]) · up[t, i], where each input row holds
// the gate part followed by the up part (the output of the merged gate_up projection).
#pragma once

#include <cstdint>

namespace qlm::ops {

// gate_up: [rows, 2·width]; out: [rows, width].
void silu_and_mul(const float* gate_up, float* out, int64_t rows, int64_t width);

}  // namespace qlm::ops
