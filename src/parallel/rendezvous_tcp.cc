// The TCP form of the rendezvous (`tcp://HOST:PORT`, parallel/rendezvous.h): rank 0 listens on
// HOST:PORT; every other rank connects (retrying until rank 0 listens) and says who it is
// (8-byte magic, rank, size); once all ranks have connected, rank 0 sends each the 128-byte NCCL id
// and closes. All waits are bounded by the timeout and poll() with short steps, so the poll hook runs
// and nothing blocks for ever.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "parallel/rendezvous.h"

namespace qlm {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'q', 'l', 'm', '-', 't', 'p', '1', '\0'};
constexpr size_t kHelloBytes = sizeof(kMagic) + 8;

ErrorContext at(const std::string& address) { return {.file = address, .tensor = {}, .layer = {}}; }

// Closes the descriptor on scope exit.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct Endpoint {
  std::string host, port;
};

Endpoint parse_address(const std::string& address) {
  const std::string rest = address.substr(std::string(kTcpRendezvousPrefix).size());
  const size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? "" : rest.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [::1]
  int value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value < 1 ||
      value > 65535)
    fail("comm.rendezvous", at(address),
         "write it as tcp://HOST:PORT with a port in 1 .. 65535, e.g. tcp://10.0.0.1:29500",
         "the rendezvous address is not tcp://HOST:PORT");
  return {host, port};
}

std::vector<addrinfo*> resolve(const std::string& address, const Endpoint& e, bool passive, addrinfo** list) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const int rc = ::getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, list);
  if (rc != 0)
    fail("comm.rendezvous", at(address), "use a host name or address every rank can resolve (rank 0's host)",
         "cannot resolve the rendezvous host: {}", ::gai_strerror(rc));
  std::vector<addrinfo*> out;
  for (addrinfo* a = *list; a; a = a->ai_next) out.push_back(a);
  return out;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// Waits up to `ms` for `events` on fd; true when ready.
bool wait_for(int fd, short events, int ms) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  const int rc = ::poll(&p, 1, ms);
  return rc > 0;
}

// Reads exactly n bytes before `deadline` (calling poll_hook between steps). False on EOF / error
// / timeout.
bool read_all(int fd, char* out, size_t n, Clock::time_point deadline, const std::function<void()>& poll_hook) {
  size_t done = 0;
  while (done < n) {
    if (Clock::now() >= deadline) return false;
    if (poll_hook) poll_hook();
    if (!wait_for(fd, POLLIN, 10)) continue;
    const ssize_t got = ::recv(fd, out + done, n - done, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t put = ::send(fd, data + done, n - done, MSG_NOSIGNAL);
    if (put < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(fd, POLLOUT, 10);
      continue;
    }
    if (put <= 0) return false;
    done += static_cast<size_t>(put);
  }
  return true;
}

void put_u32(char* p, uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
}
uint32_t get_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  if (ranks.size() > 16) s += fmt::format(", ... ({} in all)", ranks.size());
  return s;
}

constexpr const char* kTimeoutRemedy =
    "start every rank with the same --tp and --rendezvous tcp://HOST:PORT (HOST: rank 0's host, reachable from "
    "every rank), or raise --rendezvous-timeout";

NcclId serve(const std::string& address, const RendezvousOptions& o, const std::function<NcclId()>& make_id) {
  const Endpoint e = parse_address(address);
  addrinfo* list = nullptr;
  const std::vector<addrinfo*> candidates = resolve(address, e, /*passive=*/true, &list);
  Fd listener;
  std::string last_error = "no address";
  for (addrinfo* a : candidates) {
    Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (s.fd < 0) continue;
    const int one = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd, 128) == 0) {
      listener = std::move(s);
      break;
    }
    last_error = std::strerror(errno);
  }
  ::freeaddrinfo(list);
  if (listener.fd < 0)
    fail("comm.rendezvous", at(address), "run rank 0 on HOST, with a free PORT (another run may still hold it)",
         "rank 0 cannot listen on the rendezvous address: {}", last_error);
  set_nonblocking(listener.fd);
  const NcclId id = make_id();

  const auto start = Clock::now(), deadline = start + o.timeout;
  std::vector<Fd> peers(static_cast<size_t>(o.size));
  int arrived = 1;
  while (arrived < o.size) {
    if (o.poll) o.poll();
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < o.size; ++r)
        if (peers[static_cast<size_t>(r)].fd < 0) missing.push_back(r);
      fail("comm.rendezvous", at(address), kTimeoutRemedy,
           "rank 0 waited {:.1f} s: {} of {} ranks arrived (missing: {})",
           std::chrono::duration<double>(Clock::now() - start).count(), arrived, o.size, list_ranks(missing));
    }
    if (!wait_for(listener.fd, POLLIN, 10)) continue;
    Fd peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0) continue;
    set_nonblocking(peer.fd);
    char hello[kHelloBytes];
    // A connection that says nothing within a few seconds is not a rank of ours.
    const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (!read_all(peer.fd, hello, sizeof(hello), hello_deadline, o.poll) ||
        std::memcmp(hello, kMagic, sizeof(kMagic)) != 0)
      continue;
    const int rank = static_cast<int>(get_u32(hello + 8)), size = static_cast<int>(get_u32(hello + 12));
    if (size != o.size)
      fail("comm.rendezvous", at(address), "pass the same --tp N to every rank",
           "rank {} arrived with a group of {} ranks, but rank 0 has {}", rank, size, o.size);
    if (rank < 1 || rank >= o.size)
      fail("comm.rendezvous", at(address), "give every process its own --tp-rank in 1 .. N-1 (rank 0 is this one)",
           "a process arrived as rank {}, outside 1 .. {}", rank, o.size - 1);
    if (peers[static_cast<size_t>(rank)].fd >= 0)
      fail("comm.rendezvous", at(address), "give every process its own --tp-rank", "rank {} arrived twice", rank);
    peers[static_cast<size_t>(rank)] = std::move(peer);
    ++arrived;
  }
  for (int r = 1; r < o.size; ++r)
    if (!write_all(peers[static_cast<size_t>(r)].fd, id.data(), id.size()))
      fail("comm.rendezvous", at(address), "check that rank {} still runs", "cannot send the NCCL id to rank {}: {}", r,
           r, std::strerror(errno));
  return id;
}

NcclId join(const std::string& address, const RendezvousOptions& o) {
  const Endpoint e = parse_address(address);
  const auto start = Clock::now(), deadline = start + o.timeout;
  std::string last_error = "not tried";
  bool connected = false;
  for (;;) {
    if (o.poll) o.poll();
    if (Clock::now() >= deadline)
      fail("comm.rendezvous", at(address), kTimeoutRemedy, "rank {} waited {:.1f} s: {}", o.rank,
           std::chrono::duration<double>(Clock::now() - start).count(),
           connected ? "rank 0 accepted it but did not send the NCCL id (not every rank arrived)"
                     : fmt::format("rank 0 could not be reached ({})", last_error));
    addrinfo* list = nullptr;
    const std::vector<addrinfo*> candidates = resolve(address, e, /*passive=*/false, &list);
    Fd s;
    for (addrinfo* a : candidates) {
      Fd c(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (c.fd < 0) continue;
      set_nonblocking(c.fd);
      if (::connect(c.fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last_error = std::strerror(errno);
        continue;
      }
      const int wait_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count(), 0, 1000));
      int err = 0;
      socklen_t len = sizeof(err);
      if (!wait_for(c.fd, POLLOUT, wait_ms) || ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        last_error = err ? std::strerror(err) : "connection timed out";
        continue;
      }
      s = std::move(c);
      break;
    }
    ::freeaddrinfo(list);
    if (s.fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not listen yet
      continue;
    }
    connected = true;
    char hello[kHelloBytes];
    std::memcpy(hello, kMagic, sizeof(kMagic));
    put_u32(hello + 8, static_cast<uint32_t>(o.rank));
    put_u32(hello + 12, static_cast<uint32_t>(o.size));
    NcclId id{};
    if (write_all(s.fd, hello, sizeof(hello)) && read_all(s.fd, id.data(), id.size(), deadline, o.poll)) return id;
    if (Clock::now() < deadline)
      fail("comm.rendezvous", at(address), "read rank 0's error: it refuses a rank with another --tp or a rank twice",
           "rank 0 closed the connection of rank {} without sending the NCCL id", o.rank);
  }
}

}  // namespace

bool is_tcp_rendezvous(const std::string& address) { return address.rfind(kTcpRendezvousPrefix, 0) == 0; }

void check_rendezvous_address(const std::string& address) {
  if (is_tcp_rendezvous(address)) parse_address(address);
}

NcclId tcp_rendezvous(const RendezvousOptions& o, const std::function<NcclId()>& make_id) {
  const std::string address = o.dir.string();
  return o.rank == 0 ? serve(address, o, make_id) : join(address, o);
}

}  // namespace qlm
