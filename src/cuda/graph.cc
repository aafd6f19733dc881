#include "cuda/graph.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "core/error.h"

#ifdef QLM_WITH_CUDA
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#endif

namespace qlm::cuda {

#ifdef QLM_WITH_CUDA
namespace {

const char* node_kind(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "child graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeMemAlloc: return "mem alloc";
    case cudaGraphNodeTypeMemFree: return "mem free";
    default: return "other";
  }
}

// "N nodes", then the count of each kind where some node is not a kernel; N in *count.
std::string summarize_nodes(cudaGraph_t graph, size_t* count) {
  size_t n = 0;
  QLM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) QLM_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  std::map<std::string, size_t> kinds;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    QLM_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    ++kinds[node_kind(type)];
  }
  *count = n;
  std::string s = fmt::format("{} nodes", n);
  if (kinds.size() > 1 || (kinds.size() == 1 && !kinds.contains("kernel"))) {
    const char* sep = ": ";
    for (const auto& [kind, count] : kinds) {
      s += fmt::format("{}{} {}", sep, count, kind);
      sep = ", ";
    }
  }
  return s;
}

}  // namespace

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
  g->node_summary_ = summarize_nodes(graph, &g->nodes_);
  return g;
}

bool CapturedGraph::write_dot(const std::string& path) const {
  const cudaError_t e =
      cudaGraphDebugDotPrint(static_cast<cudaGraph_t>(graph_), path.c_str(), cudaGraphDebugDotFlagsVerbose);
  cudaGetLastError();
  return e == cudaSuccess;
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
bool CapturedGraph::write_dot(const std::string&) const { return false; }
#endif

}  // namespace qlm::cuda
