// Tensor parallelism across GPUs through NCCL, behind the same Communicator interface as the
// in-process group. One communicator per rank; each rank drives one GPU. Ranks find each other
// through an NCCL unique id that rank 0 creates: passed in memory to ranks that are threads of one
// process, and through the rendezvous directory (parallel/rendezvous.h) to ranks in other processes
// (publish_nccl_id / wait_for_nccl_id below are the bare single-file exchange). NVLink multicast
// stays off (NCCL_NVLS_ENABLE=0 is set before the first communicator unless the user set it).
//
// Collectives run on the device's qlm stream (cuda/context.h), so they are ordered with every
// kernel of the step, and take device tensors: all_reduce_sum in F32, F16 or BF16; all_gather of
// any dtype along any dimension; broadcast of any dtype.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "parallel/communicator.h"

namespace qlm {

// The 128 opaque bytes of an ncclUniqueId.
using NcclId = std::array<char, 128>;

// True when this build has the NCCL communicator (CUDA backend built with NCCL found).
bool nccl_available();
// A fresh id (rank 0 calls this). Throws "comm.nccl" naming NCCL's error.
NcclId make_nccl_id();
// Writes `id` to `path` atomically (a temporary file renamed into place).
void publish_nccl_id(const std::filesystem::path& path, const NcclId& id);
// Waits until `path` exists and holds an id; "comm.bootstrap" naming the path after `timeout`.
NcclId wait_for_nccl_id(const std::filesystem::path& path, std::chrono::milliseconds timeout);

// Joins the group `id` as `rank` of `size` on GPU `device`. Every rank must call it (from its
// own process or thread) within NCCL's bootstrap timeout.
std::unique_ptr<Communicator> make_nccl_communicator(const NcclId& id, int rank, int size, int device);

}  // namespace qlm
