// SiLU(gate) · up in f32, the one formula of every CUDA kernel that computes the MLP's activation (the runtime's
// silu_and_mul kernel, the grouped MoE kernels' gather): the same IEEE operations in the same order, so each gives the
// same bits for the same inputs (a kernel that fuses the activation into its input must match the separate kernel
// bit for bit; session 57's fused down projection did, commit 15a4613).
#pragma once

namespace qlm::cuda {

__device__ __forceinline__ float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

}  // namespace qlm::cuda
