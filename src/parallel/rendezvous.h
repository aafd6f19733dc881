// How the processes of one tensor-parallel group find each other before NCCL starts: a directory
// that every rank can reach (a local temp dir for ranks on one host, a shared filesystem across
// hosts). Every rank announces itself there with a file `rank-<r>`; rank 0 also publishes the NCCL
// unique id as `nccl.id`. A rank returns once the id is there and all `size` ranks have announced
// themselves, so that ncclCommInitRank (which waits for every rank without a time limit) only starts
// when nobody is missing. Files appear atomically (written aside, then hard-linked into place), and a
// name that already exists is refused: two processes claiming the same rank, or a path left over
// from an earlier run, are errors instead of a hang.
//
// Or over TCP, for hosts without a shared filesystem: `tcp://HOST:PORT`, where rank 0 listens
// (HOST is rank 0's host, reachable from every rank) and the other ranks connect and receive the id
// once all of them have connected (rendezvous_tcp.cc). Same errors, same timeout, same poll hook.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "parallel/nccl_comm.h"

namespace qlm {

struct RendezvousOptions {
  std::filesystem::path dir;  // created when missing; must be fresh for every run. Or tcp://HOST:PORT
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Called every few milliseconds while waiting; may throw to give up (the launcher checks its
  // children here, so a rank that died is reported at once instead of at the timeout).
  std::function<void()> poll{};
};

// File names inside the rendezvous directory.
inline constexpr const char* kRendezvousIdFile = "nccl.id";
std::string rendezvous_rank_file(int rank);  // "rank-3"

// Joins the group; returns the NCCL id every rank uses. Rank 0 calls `make_id` once and publishes
// the result. Throws "comm.rendezvous" for a bad rank / size, a directory that cannot be created or
// written, a rank file or id that already exists, and on timeout (naming the path, how many of the
// ranks arrived and which are missing); whatever `poll` throws passes through.
NcclId rendezvous(const RendezvousOptions& options, const std::function<NcclId()>& make_id);

inline constexpr const char* kTcpRendezvousPrefix = "tcp://";
bool is_tcp_rendezvous(const std::string& address);
// "comm.rendezvous" for a tcp:// address that is not tcp://HOST:PORT (checked before a load, so
// that a typo does not wait for the load); directories pass.
void check_rendezvous_address(const std::string& address);
// The TCP form (called by rendezvous for a tcp:// address). Also "comm.rendezvous" for an address
// that is not tcp://HOST:PORT, a host that does not resolve, a port rank 0 cannot listen on, and a
// rank that arrives with another size, outside the group, or twice.
NcclId tcp_rendezvous(const RendezvousOptions& options, const std::function<NcclId()>& make_id);

}  // namespace qlm
