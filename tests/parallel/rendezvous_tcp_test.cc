// The TCP rendezvous on loopback (no GPU needed): ranks as threads meet and get rank 0's id
// whichever starts first; the timeout at rank 0 names the address and the missing ranks; a rank
// without rank 0, a rank with another group size or a rank given twice, a malformed address and a
// port that is taken are clear errors.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "parallel/expect_error_all.h"
#include "parallel/rendezvous.h"

namespace qlm {
namespace {

using namespace std::chrono_literals;

// A loopback port that was free a moment ago (the kernel picks it).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string address() { return "tcp://127.0.0.1:" + std::to_string(free_port()); }

NcclId id_from(char seed) {
  NcclId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(seed + static_cast<char>(i * 3));
  return id;
}

NcclId no_id() {
  ADD_FAILURE() << "only rank 0 makes the id";
  return {};
}

RendezvousOptions at(const std::string& addr, int rank, int size, std::chrono::milliseconds timeout) {
  return {.dir = addr, .rank = rank, .size = size, .timeout = timeout, .poll = {}};
}

TEST(TcpRendezvous, RanksMeetOverLoopbackWhicheverStartsFirst) {
  for (bool rank0_first : {false, true}) {
    const std::string addr = address();
    constexpr int kSize = 4;
    std::vector<NcclId> got(kSize);
    std::vector<std::thread> threads;
    for (int r = 0; r < kSize; ++r)
      threads.emplace_back([&, r] {
        if ((r == 0) != rank0_first) std::this_thread::sleep_for(100ms);
        got[static_cast<size_t>(r)] = rendezvous(at(addr, r, kSize, 20s), r == 0 ? [] { return id_from(5); } : no_id);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kSize; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], id_from(5)) << "rank " << r;
  }
}

TEST(TcpRendezvous, RankZeroTimeoutNamesTheAddressAndTheMissingRanks) {
  const std::string addr = address();
  std::thread rank2([&] { EXPECT_THROW(rendezvous(at(addr, 2, 3, 2s), no_id), Error); });
  EXPECT_QLM_ERROR_ALL(rendezvous(at(addr, 0, 3, 400ms), [] { return id_from(1); }), "comm.rendezvous", "rank 0 waited",
                       "2 of 3 ranks arrived (missing: 1)", addr, "--rendezvous-timeout");
  rank2.join();  // it learns that rank 0 gave up
}

TEST(TcpRendezvous, RankWithoutRankZeroSaysItCannotReachIt) {
  const std::string addr = address();
  EXPECT_QLM_ERROR_ALL(rendezvous(at(addr, 1, 2, 200ms), no_id), "comm.rendezvous", "rank 1 waited",
                       "rank 0 could not be reached", addr);
}

TEST(TcpRendezvous, RankWithAnotherGroupSizeIsRefusedOnBothSides) {
  const std::string addr = address();
  std::thread rank1([&] {
    EXPECT_QLM_ERROR_ALL(rendezvous(at(addr, 1, 3, 10s), no_id), "comm.rendezvous",
                         "rank 0 closed the connection of rank 1");
  });
  EXPECT_QLM_ERROR_ALL(rendezvous(at(addr, 0, 2, 10s), [] { return id_from(2); }), "comm.rendezvous",
                       "rank 1 arrived with a group of 3 ranks, but rank 0 has 2", "same --tp");
  rank1.join();
}

TEST(TcpRendezvous, RankGivenTwiceIsRefused) {
  const std::string addr = address();
  std::vector<std::thread> twins;
  for (int i = 0; i < 2; ++i)
    twins.emplace_back([&] {
      try {
        rendezvous(at(addr, 1, 3, 10s), no_id);
      } catch (const Error&) {
      }
    });
  EXPECT_QLM_ERROR_ALL(rendezvous(at(addr, 0, 3, 10s), [] { return id_from(3); }), "comm.rendezvous",
                       "rank 1 arrived twice");
  for (auto& t : twins) t.join();
}

TEST(TcpRendezvous, MalformedAddressesAndTakenPortsAreClearErrors) {
  for (const std::string bad :
       {"tcp://127.0.0.1", "tcp://127.0.0.1:0", "tcp://127.0.0.1:x", "tcp://:29500", "tcp://host:70000"}) {
    EXPECT_QLM_ERROR_ALL(check_rendezvous_address(bad), "comm.rendezvous", "not tcp://HOST:PORT", bad);
    EXPECT_QLM_ERROR_ALL(rendezvous(at(bad, 1, 2, 50ms), no_id), "comm.rendezvous", "not tcp://HOST:PORT");
  }
  check_rendezvous_address("tcp://[::1]:29500");
  check_rendezvous_address("/shared/run-1");
  // Rank 0 cannot listen on a port another socket holds.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string taken = "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  EXPECT_QLM_ERROR_ALL(rendezvous(at(taken, 0, 2, 1s), [] { return id_from(4); }), "comm.rendezvous",
                       "rank 0 cannot listen", taken);
  ::close(holder);
}

}  // namespace
}  // namespace qlm
