// Programmatic dependent launch (sm_90): a kernel launched with the programmatic-stream-serialization
// attribute (pdl_attribute) may start while its predecessor in the stream still runs. It must call
// wait_for_predecessor() before it reads the predecessor's output or writes memory the predecessor may
// still read; allow_dependents() lets the next such kernel start before this one ends. Without the
// attribute, or compiled for an older device, both are no-ops.
#pragma once

#include <cuda_runtime.h>

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

inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

}  // namespace qlm::cuda
