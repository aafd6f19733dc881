#include "core/device_memory.h"

#include <array>
#include <cstring>

namespace qlm {

namespace {
std::array<DeviceMemoryOps, 2>& registered() {
  static std::array<DeviceMemoryOps, 2> ops{};
  return ops;
}
}  // namespace

void register_device_memory(DeviceType type, const DeviceMemoryOps& ops) {
  registered()[static_cast<size_t>(type)] = ops;
}

bool device_memory_available(DeviceType type) { return registered()[static_cast<size_t>(type)].allocate != nullptr; }

const DeviceMemoryOps& device_memory(Device device) {
  const DeviceMemoryOps& ops = registered()[static_cast<size_t>(device.type)];
  if (ops.allocate == nullptr)
    fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed (QLM_CUDA=AUTO or ON), or use --device cpu",
         "no memory backend for {}: this qlm was built without it", device.str());
  return ops;
}

void copy_tensor_bytes(Tensor& dst, const Tensor& src) {
  QLM_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.nbytes() == src.nbytes());
  if (src.nbytes() == 0) return;
  if (dst.on_host() && src.on_host()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  const Device backend = dst.on_host() ? src.device() : dst.device();
  device_memory(backend).copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes());
}

}  // namespace qlm
