// Device-side timing for benchmarks, usable from code that includes no CUDA headers.
#pragma once

#include <functional>

namespace qlm::cuda {

// Microseconds of device time that `work` takes: `work` enqueues on device `index`'s qlm stream
// (cuda/context.h) and this records events before and after it, then waits for the second.
// Throws "cuda.unavailable" in builds without the CUDA backend.
double time_device_us(int index, const std::function<void()>& work);

// Waits until every piece of qlm's work on device `index` finished.
void synchronize_device(int index);

}  // namespace qlm::cuda
