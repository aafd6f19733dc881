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

namespace {
// `work` captured into a graph; "cuda.graph" (naming `what` and the CUDA error) where it cannot be.
std::unique_ptr<CapturedGraph> capture_for_timing(int index, const std::function<void()>& work,
                                                  const std::string& what) {
  std::string why;
  std::unique_ptr<CapturedGraph> graph = CapturedGraph::capture(index, work, &why);
  if (!graph)
    fail("cuda.graph", {}, "time with events instead (--timing events)",
         "{} could not be captured into a CUDA graph: {}", what, why);
  return graph;
}
}  // namespace

std::vector<double> time_graph_us(int index, const std::function<void()>& work, int replays) {
  const std::unique_ptr<CapturedGraph> graph = capture_for_timing(index, work, "the work");
  graph->launch();  // warm-up
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) us.push_back(time_device_us(index, [&] { graph->launch(); }));
  return us;
}

std::vector<double> time_graphs_us(int index, const std::vector<std::function<void()>>& works) {
  std::vector<std::unique_ptr<CapturedGraph>> graphs;
  for (const auto& work : works)
    graphs.push_back(capture_for_timing(index, work, fmt::format("work {} of {}", graphs.size() + 1, works.size())));
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
