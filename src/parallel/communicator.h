// Tensor-parallel communication. The in-process LocalCommGroup runs N ranks as N threads of one
// process (tests and CPU runs); an NCCL communicator implements the same interface on GPUs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace qlm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sum over all ranks of a contiguous F32 tensor of the same shape on every rank.
  virtual void all_reduce_sum(Tensor& t) = 0;
  // Concatenates every rank's contiguous tensor along dim `dim` (same shapes), in rank order.
  virtual Tensor all_gather(const Tensor& t, int dim) = 0;
  // Overwrites every rank's contiguous tensor with rank `root`'s (same shape and dtype everywhere).
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
};

// Where a layer sits in the tensor-parallel group. comm may be null when size == 1.
struct TpContext {
  int rank = 0;
  int size = 1;
  Communicator* comm = nullptr;
};

// N ranks in one process. Every collective must be called by all N ranks (each from its own thread).
class LocalCommGroup {
 public:
  explicit LocalCommGroup(int size);
  ~LocalCommGroup();
  int size() const;
  Communicator& rank(int r);
  TpContext context(int r);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

// Runs fn(rank) on `size` threads and rethrows the first exception (tests and in-process TP).
void run_on_ranks(int size, const std::function<void(int rank)>& fn);

}  // namespace qlm
