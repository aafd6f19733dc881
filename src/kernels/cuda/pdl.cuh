// Programmatic dependent launch (sm_90): a kernel launched with the programmatic-stream-serialization
// attribute (pdl_attribute) may start while its predecessor in the stream still runs. It must call
// wait_for_predecessor() before it reads the predecessor's output or writes memory the predecessor may
// still read; allow_dependents() lets the next such kernel start before this one ends. Without the
// attribute, or compiled for an older device, both are no-ops.
//
// Invariant for a chain of such launches: every kernel launched with the attribute waits (in every
// thread that touches memory written or read by earlier kernels) before that access. Then a kernel's
// completion implies its predecessor's, so stream order holds transitively, and the caching allocator's
// stream-ordered reuse stays safe. Kernels launched without the attribute (cuBLAS, NCCL, copies) keep
// the plain stream order on both sides.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/env_switch.h"
#include "kernels/cuda/device_attribute.h"

namespace qlm::cuda {

__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The first statement of a kernel launched by launch_pdl: wait for the previous kernel, then let the
// next one launch (its blocks become resident and reach their own wait while this kernel runs). Waiting
// first keeps at most one kernel ahead holding resources.
__device__ __forceinline__ void pdl_enter() {
  wait_for_predecessor();
  allow_dependents();
}

// pdl_enter's other order, for short kernels whose successor is a long one (SiLU·mul before the down projection):
// let the next kernel launch first, then wait. The next kernel's blocks then become resident, and a W4A16 GEMM
// among them requests its first weights (which never depend on earlier kernels), as the kernel before this one
// frees its SMs, not only once this one runs. Still sound: this kernel waits before it touches memory, and a
// kernel launches only once every block of the one before it has started, so a block waiting here never holds an
// SM that an earlier grid still needs. Measured per kernel (docs/models.md, decode): it pays after SiLU·mul and after
// the RMSNorm before the qkv projection; after the RMSNorm before the MLP only on 70B-shaped layers, around attention
// nowhere: there the early weight traffic slows a latency-bound chain on the critical path.
__device__ __forceinline__ void pdl_enter_next_first() {
  allow_dependents();
  wait_for_predecessor();
}

inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

// Whether launch_pdl sets the attribute on the current device: compute capability 9.0 or newer, and
// the environment variable QLM_PDL is not "0" (read once per process; QLM_PDL=0 launches every such
// kernel in plain stream order, for comparison and diagnosis).
inline bool pdl_launches() {
  static const bool enabled = env_switch_on("QLM_PDL");
  return enabled && current_device_attribute_at_least<cudaDevAttrComputeCapabilityMajor, 9>();
}

// Thread-block clusters of `blocks` blocks along x (sm_90).
inline cudaLaunchAttribute cluster_attribute(unsigned blocks) {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = blocks;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch where `pdl` is set
// (the caller's own switch) and in clusters of `cluster` blocks along x where that is above 1 (grid.x a multiple of
// it). With pdl the kernel must start with pdl_enter() (or wait before its first dependent access).
template <typename... Params, typename... Args>
cudaError_t launch_pdl_cluster_if(bool pdl, unsigned cluster, void (*kernel)(Params...), dim3 grid, dim3 block,
                                  size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  if (pdl) attrs[cfg.numAttrs++] = pdl_attribute();
  if (cluster > 1) attrs[cfg.numAttrs++] = cluster_attribute(cluster);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The same without clusters.
template <typename... Params, typename... Args>
cudaError_t launch_pdl_if(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  return launch_pdl_cluster_if(pdl, 1, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

// The same where pdl_launches().
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       Args&&... args) {
  return launch_pdl_if(pdl_launches(), kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace qlm::cuda
