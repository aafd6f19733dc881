// Attributes of the current CUDA device asked once per device: launchers check them on every launch
// (e.g. while a decode step is captured), so the answer is cached per (attribute, bound, device).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace qlm::cuda {

// Whether attribute `Attr` of the current device is at least `Min`; false where the device cannot be
// asked (no device, an error, or an ordinal past the cache's 64 entries).
template <cudaDeviceAttr Attr, int Min>
bool current_device_attribute_at_least() {
  constexpr int kCachedDevices = 64;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kCachedDevices) return false;
  static std::atomic<int> known[kCachedDevices];  // 0 unknown, 1 no, 2 yes (zero-initialised: static storage)
  int k = known[dev].load(std::memory_order_relaxed);
  if (k == 0) {
    int value = 0;
    k = cudaDeviceGetAttribute(&value, Attr, dev) == cudaSuccess && value >= Min ? 2 : 1;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

}  // namespace qlm::cuda
