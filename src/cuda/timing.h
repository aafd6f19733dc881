// Device-side timing for benchmarks, usable from code that includes no CUDA headers.
#pragma once

#include <functional>
#include <vector>

namespace qlm::cuda {

// Microseconds of device time that `work` takes: `work` enqueues on device `index`'s qlm stream
// (cuda/context.h) and this records events before and after it, then waits for the second.
// Throws "cuda.unavailable" in builds without the CUDA backend.
double time_device_us(int index, const std::function<void()>& work);

// Microseconds of device time of one replay of a CUDA graph captured from `work` (which must only
// enqueue on the device's qlm stream: no synchronisation, no host copies): host launch overhead is
// out of the measurement. Returns the time of each of `replays` replays (after one warm-up). Throws
// "cuda.graph" (naming the CUDA error) when `work` cannot be captured.
std::vector<double> time_graph_us(int index, const std::function<void()>& work, int replays);

// The same for several pieces of work, each captured into a graph of its own: every graph replayed once to warm up,
// then each once more in order, timed; returns each work's time. Consecutive replays run different work (e.g.
// different routings of one MoE layer), so what one leaves in L2 is not what the next reads. Throws "cuda.graph"
// when any cannot be captured.
std::vector<double> time_graphs_us(int index, const std::vector<std::function<void()>>& works);

// Waits until every piece of qlm's work on device `index` finished.
void synchronize_device(int index);

}  // namespace qlm::cuda
