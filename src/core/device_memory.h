// Memory on devices other than the host. A backend (the CUDA one, src/cuda/) registers how to
// allocate, release, copy and clear its memory when the library loads; core code stays free of
// any device API. Without a registered backend, asking for device memory is an error naming the
// device and what would work.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace qlm {

struct DeviceMemoryOps {
  // Returns memory for `nbytes` on device `index`; throws qlm::Error ("cuda.oom", ...) on failure.
  void* (*allocate)(size_t nbytes, int index) = nullptr;
  // Gives memory from `allocate` back (may keep it cached for reuse). Never throws.
  void (*release)(void* ptr, size_t nbytes, int index) noexcept = nullptr;
  // Copies `nbytes`; either side may be the host or a device of this backend. Returns when the
  // bytes can be read at `dst` by the host (device → host) or by later device work (→ device).
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = nullptr;
  // Sets `nbytes` at `ptr` on device `index` to zero (ordered with later device work).
  void (*zero)(void* ptr, size_t nbytes, int index) = nullptr;
};

void register_device_memory(DeviceType type, const DeviceMemoryOps& ops);
// The ops of `device`'s backend; throws "device.unavailable" when none is registered.
const DeviceMemoryOps& device_memory(Device device);
bool device_memory_available(DeviceType type);

// Copies a contiguous tensor's bytes between any two devices (the shapes and dtypes must match).
void copy_tensor_bytes(Tensor& dst, const Tensor& src);

}  // namespace qlm
