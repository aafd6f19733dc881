#include "cuda/timing.h"

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/graph.h"

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
  std::string why;
  const std::unique_ptr<CapturedGraph> graph = CapturedGraph::capture(index, work, &why);
  if (!graph)
    fail("cuda.graph", {}, "time with events instead (--timing events)",
         "the work could not be captured into a CUDA graph: {}", why);
  graph->launch();  // warm-up
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) us.push_back(time_device_us(index, [&] { graph->launch(); }));
  return us;
}

std::vector<double> time_graphs_us(int index, const std::vector<std::function<void()>>& works) {
  std::vector<std::unique_ptr<CapturedGraph>> graphs;
  for (const auto& work : works) {
    std::string why;
    graphs.push_back(CapturedGraph::capture(index, work, &why));
    if (!graphs.back())
      fail("cuda.graph", {}, "time with events instead (--timing events)",
           "work {} of {} could not be captured into a CUDA graph: {}", graphs.size(), works.size(), why);
  }
  for (const auto& g : graphs) g->launch();  // warm-up
  std::vector<double> us;
  for (const auto& g : graphs) us.push_back(time_device_us(index, [&] { g->launch(); }));
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
std::vector<double> time_graphs_us(int, const std::vector<std::function<void()>>&) { unavailable(); }
void synchronize_device(int) { unavailable(); }
#endif

}  // namespace qlm::cuda
