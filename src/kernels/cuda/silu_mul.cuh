// SiLU(gate) · up in f32, the one formula of every CUDA kernel that computes the MLP's activation (the runtime's
// silu_and_mul kernel, the W4A16 stream GEMM's producers that form its x from the gate | up rows): the same IEEE
// operations in the same order, so each gives the same bits for the same inputs.
#pragma once

namespace qlm::cuda {

__device__ __forceinline__ float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

}  // namespace qlm::cuda
