// Per-device CUDA state shared by every kernel of the backend: one stream (all of qlm's device
// work is ordered on it, so memory freed to the caching allocator may be reused at once), cuBLAS
// and cuBLASLt handles bound to that stream, a cuBLASLt workspace, and the device's properties.
// Include only from code built with QLM_WITH_CUDA.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace qlm::cuda {

struct Context {
  int device = 0;
  int capability = 0;  // major*10 + minor
  int sm_count = 0;
  size_t l2_bytes = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;
  void* lt_workspace = nullptr;
  size_t lt_workspace_bytes = 0;
};

// The context of device `index`, created on first use (and made the current device).
Context& context(int index);
// Makes `index` the calling thread's current device.
void set_device(int index);
// Waits for all of qlm's work on device `index`.
void synchronize(int index);

// Caching allocator statistics of one device.
struct MemoryStats {
  size_t in_use = 0;      // bytes handed out
  size_t cached = 0;      // bytes held for reuse
  size_t peak_in_use = 0;
  size_t cuda_malloc_calls = 0;
};
MemoryStats memory_stats(int index);
// Returns every cached block of device `index` to the driver (the capture pool's blocks stay).
void empty_cache(int index);
// Between these, device `index`'s allocations come from the pool private to CUDA-graph captures
// (caching_allocator.cc); cuda/graph.h brackets every capture with them.
void begin_capture_allocations(int index);
void end_capture_allocations(int index);

}  // namespace qlm::cuda
