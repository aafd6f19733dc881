#include "tools/qlm/device_bandwidth.h"

#include <algorithm>
#include <cstdint>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "cuda/timing.h"

namespace qlm {

double copy_bandwidth_gbps(Device device) {
  const int64_t n = int64_t{1} << 30;
  const Tensor src = Tensor::zeros({n}, DType::U8, device);
  Tensor dst = Tensor::empty({n}, DType::U8, device);
  double best_us = 1e30;
  for (int i = 0; i < 5; ++i)
    best_us = std::min(best_us, cuda::time_device_us(device.index, [&] { copy_tensor_bytes(dst, src); }));
  return 2.0 * static_cast<double>(n) / (best_us * 1e3);
}

}  // namespace qlm
