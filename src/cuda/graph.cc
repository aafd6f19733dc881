#include "cuda/graph.h"

#include "core/error.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#endif

namespace qlm::cuda {

#ifdef QLM_WITH_CUDA
std::unique_ptr<CapturedGraph> CapturedGraph::capture(int index, const std::function<void()>& work, std::string* why) {
  Context& ctx = context(index);
  // Relaxed: the caching allocator may still call cudaMalloc while the work is captured.
  QLM_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
  begin_capture_allocations(index);
  cudaGraph_t graph = nullptr;
  try {
    work();
  } catch (...) {
    end_capture_allocations(index);
    cudaStreamEndCapture(ctx.stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  end_capture_allocations(index);
  const cudaError_t ended = cudaStreamEndCapture(ctx.stream, &graph);
  cudaGetLastError();  // a call refused during the capture leaves its (non-sticky) error behind
  std::string failed;
  if (ended != cudaSuccess) failed = cudaGetErrorString(ended);
  cudaGraphExec_t exec = nullptr;
  if (failed.empty()) {
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    if (made != cudaSuccess) {
      cudaGetLastError();
      failed = cudaGetErrorString(made);
    }
  }
  if (!failed.empty()) {
    if (graph) cudaGraphDestroy(graph);
    if (why) *why = failed;
    return nullptr;
  }
  std::unique_ptr<CapturedGraph> g(new CapturedGraph());
  g->index_ = index;
  g->graph_ = graph;
  g->exec_ = exec;
  QLM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &g->nodes_));
  return g;
}

CapturedGraph::~CapturedGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CapturedGraph::launch() const {
  QLM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), context(index_).stream));
}
#else
std::unique_ptr<CapturedGraph> CapturedGraph::capture(int, const std::function<void()>&, std::string*) {
  fail("cuda.unavailable", {}, "rebuild with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
       "this qlm was built without the CUDA backend");
}
CapturedGraph::~CapturedGraph() = default;
void CapturedGraph::launch() const {}
#endif

}  // namespace qlm::cuda
