// CUDA graphs of qlm work, usable from code that includes no CUDA headers: capture once what a
// function enqueues on a device's qlm stream, then replay it with one launch. A graph replays the
// exact kernels, arguments and addresses it captured, so whatever changes between replays must be
// in device memory the kernels read (the decode step's token and slot, docs/architecture.md).
// Allocations made during the capture come from the allocator's capture pool (cuda/context.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace qlm::cuda {

class CapturedGraph {
 public:
  // Captures what `work` enqueues on device `index`'s qlm stream; nothing of it runs. Returns null
  // and sets *why (the CUDA error) when CUDA refuses the capture; rethrows what `work` throws (a
  // synchronising call or a host copy inside it fails there, as a qlm::Error), the capture undone.
  // Throws "cuda.unavailable" in builds without the CUDA backend.
  static std::unique_ptr<CapturedGraph> capture(int index, const std::function<void()>& work, std::string* why);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Enqueues one replay on the device's qlm stream.
  void launch() const;
  // Kernel (and copy / memset) nodes in the graph.
  size_t nodes() const { return nodes_; }
  // The node count with, where not every node is a kernel, the count of each kind:
  // "452 nodes: 292 kernel, 160 memset".
  const std::string& node_summary() const { return node_summary_; }
  // Writes the graph in Graphviz form (cudaGraphDebugDotPrint, kernel names and parameters) to `path`;
  // false when CUDA cannot.
  bool write_dot(const std::string& path) const;

 private:
  CapturedGraph() = default;
  int index_ = 0;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  size_t nodes_ = 0;
  std::string node_summary_;
};

}  // namespace qlm::cuda
