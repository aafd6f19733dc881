#include "cuda/timing.h"

#include "core/error.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#endif

namespace qlm::cuda {

#ifdef QLM_WITH_CUDA
double time_device_us(int index, const std::function<void()>& work) {
  Context& ctx = context(index);
  cudaEvent_t start = nullptr, stop = nullptr;
  QLM_CUDA_CHECK(cudaEventCreate(&start));
  QLM_CUDA_CHECK(cudaEventCreate(&stop));
  QLM_CUDA_CHECK(cudaEventRecord(start, ctx.stream));
  work();
  QLM_CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
  QLM_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  QLM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e3;
}

void synchronize_device(int index) { synchronize(index); }
#else
namespace {
[[noreturn]] void unavailable() {
  fail("cuda.unavailable", {}, "rebuild with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
       "this qlm was built without the CUDA backend");
}
}  // namespace
double time_device_us(int, const std::function<void()>&) { unavailable(); }
void synchronize_device(int) { unavailable(); }
#endif

}  // namespace qlm::cuda
