// Values that steps enqueued ahead of the host (CUDA graph replays on a device's qlm stream) leave in device memory,
// read back without stopping the stream: each step's read is an asynchronous copy into its own slot of pinned host
// memory, followed by an event, so the host waits for step i's value while steps i + 1, ... are already queued.
// Usable from code that includes no CUDA headers. Slot i % slots serves step i: a step must have been waited for
// before step i + slots is enqueued (the caller keeps at most `slots` steps in flight).
#pragma once

#include <cstdint>

namespace qlm::cuda {

class StepReadback {
 public:
  // Throws "cuda.unavailable" in builds without the CUDA backend.
  StepReadback(int index, int slots);
  // Waits for every enqueued read (the copies write into the slots), then frees them.
  ~StepReadback();
  StepReadback(const StepReadback&) = delete;
  StepReadback& operator=(const StepReadback&) = delete;

  int slots() const { return slots_; }
  // Enqueues, after the work already on the stream, the copy of *device_value into step's slot and its event. Steps
  // are enqueued in order from 0.
  void enqueue(int64_t step, const int32_t* device_value);
  // Waits for step's copy and returns the value (the step must have been enqueued, and its slot not reused since).
  int32_t wait(int64_t step);

 private:
  int index_ = 0;
  int slots_ = 0;
  int32_t* host_ = nullptr;  // pinned, [slots]
  void** events_ = nullptr;  // cudaEvent_t [slots]
  int64_t last_enqueued_ = -1;
};

}  // namespace qlm::cuda
