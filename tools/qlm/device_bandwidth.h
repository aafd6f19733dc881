// The memory bandwidth the GPU benchmarks put under their floors (bytes / bandwidth).
#pragma once

#include "core/tensor.h"  // Device

namespace qlm {

// Device-to-device copy bandwidth of `device` (bytes read + written per second, GB/s): best of 5 copies of 1 GiB.
double copy_bandwidth_gbps(Device device);

}  // namespace qlm
