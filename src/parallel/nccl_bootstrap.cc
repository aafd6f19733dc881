// NCCL unique-id exchange through a file: the bootstrap works for ranks in one process, in several
// processes on one host, and across hosts that share a directory.
#include <fstream>
#include <thread>

#include "core/error.h"
#include "parallel/nccl_comm.h"

namespace qlm {

void publish_nccl_id(const std::filesystem::path& path, const NcclId& id) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(id.data(), static_cast<std::streamsize>(id.size()));
    if (!out)
      fail("comm.bootstrap", {.file = tmp.string(), .tensor = {}, .layer = {}},
           "choose a writable directory for the rendezvous file", "cannot write the NCCL id");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    fail("comm.bootstrap", {.file = path.string(), .tensor = {}, .layer = {}},
         "choose a writable directory for the rendezvous file", "cannot publish the NCCL id: {}", ec.message());
}

NcclId wait_for_nccl_id(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    NcclId id{};
    if (in && in.read(id.data(), static_cast<std::streamsize>(id.size())) &&
        in.gcount() == static_cast<std::streamsize>(id.size()))
      return id;
    if (std::chrono::steady_clock::now() >= deadline)
      fail("comm.bootstrap", {.file = path.string(), .tensor = {}, .layer = {}},
           "start rank 0 (which writes the file) with the same rendezvous path, or raise the timeout",
           "no NCCL id appeared within {} ms", timeout.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace qlm
