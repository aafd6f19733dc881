#include "parallel/rendezvous.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"

namespace qlm {

namespace fs = std::filesystem;

namespace {

ErrorContext at(const fs::path& path) { return {.file = path.string(), .tensor = {}, .layer = {}}; }

std::string host_and_pid() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  return fmt::format("{} pid {}", host, ::getpid());
}

// Writes `bytes` to a private temporary name, then links it to `path`: the file appears complete or
// not at all, and an existing `path` is never replaced (link fails with EEXIST, also on NFS).
// Returns false when `path` already exists.
bool create_exclusive(const fs::path& path, std::string_view bytes) {
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    fail("comm.rendezvous", at(tmp), "choose a rendezvous directory every rank can write",
         "cannot create a rendezvous file: {}", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("comm.rendezvous", at(tmp), "check free space and permissions of the rendezvous directory",
           "cannot write a rendezvous file: {}", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked == 0) return true;
  if (err == EEXIST) return false;
  fail("comm.rendezvous", at(path), "choose a rendezvous directory on a filesystem with hard links (local disk, NFS)",
       "cannot publish a rendezvous file: {}", std::strerror(err));
}

std::string read_small(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool read_id(const fs::path& path, NcclId& id) {
  std::ifstream in(path, std::ios::binary);
  return in && in.read(id.data(), static_cast<std::streamsize>(id.size())) &&
         in.gcount() == static_cast<std::streamsize>(id.size());
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  if (ranks.size() > 16) s += fmt::format(", ... ({} in all)", ranks.size());
  return s;
}

}  // namespace

std::string rendezvous_rank_file(int rank) { return fmt::format("rank-{}", rank); }

NcclId rendezvous(const RendezvousOptions& o, const std::function<NcclId()>& make_id) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    fail("comm.rendezvous", at(o.dir), "give every process a rank in [0, size)",
         "rank {} does not fit a group of {} ranks", o.rank, o.size);
  if (o.dir.empty())
    fail("comm.rendezvous", {}, "pass --rendezvous DIR (a directory every rank can reach)",
         "no rendezvous directory was given");
  if (is_tcp_rendezvous(o.dir.string())) return tcp_rendezvous(o, make_id);
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (!fs::is_directory(o.dir))
    fail("comm.rendezvous", at(o.dir), "pass a directory (it is created when missing) that every rank can write",
         "the rendezvous path is not a directory{}", ec ? fmt::format(" and cannot be created: {}", ec.message()) : "");
  const fs::path id_path = o.dir / kRendezvousIdFile;
  const std::string fresh_remedy =
      "use a fresh rendezvous directory for every run, and a different --tp-rank for every process";

  NcclId id{};
  bool have_id = false;
  if (o.rank == 0) {
    if (fs::exists(id_path))
      fail("comm.rendezvous", at(id_path), fresh_remedy,
           "the rendezvous directory already holds an NCCL id (from an earlier run, or another rank 0)");
    id = make_id();
    if (!create_exclusive(id_path, std::string_view(id.data(), id.size())))
      fail("comm.rendezvous", at(id_path), fresh_remedy, "another rank 0 published an NCCL id here first");
    have_id = true;
  }
  const fs::path mine = o.dir / rendezvous_rank_file(o.rank);
  if (!create_exclusive(mine, host_and_pid() + "\n"))
    fail("comm.rendezvous", at(mine), fresh_remedy, "rank {} has already joined this rendezvous ({})", o.rank,
         read_small(mine).substr(0, 200));

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + o.timeout;
  std::vector<int> missing;
  for (;;) {
    if (!have_id) have_id = read_id(id_path, id);
    missing.clear();
    for (int r = 0; r < o.size; ++r)
      if (!fs::exists(o.dir / rendezvous_rank_file(r))) missing.push_back(r);
    if (have_id && missing.empty()) return id;
    if (o.poll) o.poll();
    if (std::chrono::steady_clock::now() >= deadline) {
      const int arrived = o.size - static_cast<int>(missing.size());
      fail("comm.rendezvous", at(o.dir),
           "start every rank with the same --tp and --rendezvous (rank 0 publishes the NCCL id), or raise "
           "--rendezvous-timeout",
           "rank {} waited {:.1f} s: {} of {} ranks arrived (missing: {}){}", o.rank,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), arrived, o.size,
           missing.empty() ? std::string("none") : list_ranks(missing),
           have_id ? "" : "; rank 0 has not published the NCCL id");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace qlm
