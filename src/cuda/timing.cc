#include "cuda/timing.h"

#include <vector>

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

std::vector<double> time_graph_us(int index, const std::function<void()>& work, int replays) {
  Context& ctx = context(index);
  cudaGraph_t graph = nullptr;
  // Relaxed: the caching allocator may still call cudaMalloc while the work is captured.
  QLM_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
  try {
    work();
  } catch (...) {
    cudaStreamEndCapture(ctx.stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  const cudaError_t captured = cudaStreamEndCapture(ctx.stream, &graph);
  if (captured != cudaSuccess) {
    cudaGetLastError();
    fail("cuda.graph", {}, "time with events instead (--timing events)",
         "the work could not be captured into a CUDA graph: {}", cudaGetErrorString(captured));
  }
  cudaGraphExec_t exec = nullptr;
  QLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  QLM_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));  // warm-up
  std::vector<double> us;
  for (int r = 0; r < replays; ++r)
    us.push_back(time_device_us(index, [&] { QLM_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream)); }));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
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
std::vector<double> time_graph_us(int, const std::function<void()>&, int) { unavailable(); }
void synchronize_device(int) { unavailable(); }
#endif

}  // namespace qlm::cuda
