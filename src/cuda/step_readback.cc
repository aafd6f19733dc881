#include "cuda/step_readback.h"

#include "core/error.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#endif

namespace qlm::cuda {

#ifdef QLM_WITH_CUDA
StepReadback::StepReadback(int index, int slots) : index_(index), slots_(slots) {
  QLM_CHECK(slots > 0);
  set_device(index);
  QLM_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(int32_t) * slots, cudaHostAllocDefault));
  events_ = new void*[static_cast<size_t>(slots)]();
  for (int i = 0; i < slots; ++i) {
    cudaEvent_t e = nullptr;
    QLM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_[i] = e;
  }
}

StepReadback::~StepReadback() {
  if (events_ != nullptr) {
    // The copies still in flight write into host_: wait for the last one enqueued (the stream is in order).
    if (last_enqueued_ >= 0) cudaEventSynchronize(static_cast<cudaEvent_t>(events_[last_enqueued_ % slots_]));
    for (int i = 0; i < slots_; ++i)
      if (events_[i] != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(events_[i]));
    delete[] events_;
  }
  if (host_ != nullptr) cudaFreeHost(host_);
  cudaGetLastError();  // never throw from here; a failed step has already reported its error
}

void StepReadback::enqueue(int64_t step, const int32_t* device_value) {
  QLM_CHECK(step == last_enqueued_ + 1);
  const int slot = static_cast<int>(step % slots_);
  cudaStream_t stream = context(index_).stream;
  QLM_CUDA_CHECK(cudaMemcpyAsync(host_ + slot, device_value, sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  QLM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[slot]), stream));
  last_enqueued_ = step;
}

int32_t StepReadback::wait(int64_t step) {
  QLM_CHECK(step >= 0 && step <= last_enqueued_ && last_enqueued_ - step < slots_);
  const int slot = static_cast<int>(step % slots_);
  QLM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(events_[slot])));
  return host_[slot];
}
#else
StepReadback::StepReadback(int, int) {
  fail("cuda.unavailable", {}, "rebuild with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
       "this qlm was built without the CUDA backend");
}
StepReadback::~StepReadback() = default;
void StepReadback::enqueue(int64_t, const int32_t*) {}
int32_t StepReadback::wait(int64_t) { return 0; }
#endif

}  // namespace qlm::cuda
