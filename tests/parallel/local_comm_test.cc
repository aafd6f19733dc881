#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

TEST(LocalComm, AllReduceSumsInRankOrderIdenticallyOnEveryRank) {
  for (int n : {1, 2, 3, 4}) {
    LocalCommGroup group(n);
    std::vector<std::vector<float>> results(static_cast<size_t>(n));
    run_on_ranks(n, [&](int r) {
      Communicator& c = group.rank(r);
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), n);
      for (int round = 0; round < 3; ++round) {
        // Values whose float sum depends on the order: rank order is the contract.
        Tensor t = Tensor::from_vector<float>({r == 0 ? 1e8f : 1.0f, static_cast<float>(r + round), 0.1f * r}, {3});
        c.all_reduce_sum(t);
        results[static_cast<size_t>(r)] = t.to_float_vector();
      }
    });
    float expect0 = 1e8f;
    for (int r = 1; r < n; ++r) expect0 += 1.0f;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(results[static_cast<size_t>(r)], results[0]);
      EXPECT_EQ(results[static_cast<size_t>(r)][0], expect0);
      EXPECT_EQ(results[static_cast<size_t>(r)][1], static_cast<float>(n * (n - 1) / 2 + 2 * n));
    }
  }
}

TEST(LocalComm, AllGatherConcatenatesInRankOrder) {
  LocalCommGroup group(3);
  std::vector<Tensor> out(3);
  run_on_ranks(3, [&](int r) {
    Tensor t = Tensor::from_vector<int32_t>({10 * r, 10 * r + 1, 10 * r + 2, 10 * r + 3}, {2, 2});
    out[static_cast<size_t>(r)] = group.rank(r).all_gather(t, 1);
    group.rank(r).barrier();
  });
  for (const Tensor& t : out) {
    EXPECT_EQ(t.shape(), (Shape{2, 6}));
    EXPECT_EQ(std::vector<int32_t>(t.span<int32_t>().begin(), t.span<int32_t>().end()),
              (std::vector<int32_t>{0, 1, 10, 11, 20, 21, 2, 3, 12, 13, 22, 23}));
  }
}

TEST(LocalComm, MismatchedShapesFailOnEveryRankWithoutDeadlock) {
  LocalCommGroup group(2);
  EXPECT_QLM_ERROR(run_on_ranks(2,
                                [&](int r) {
                                  Tensor t = Tensor::zeros({r + 1}, DType::F32);
                                  group.rank(r).all_reduce_sum(t);
                                }),
                   "comm.shape", "rank 1's tensor F32[2]");
}

TEST(LocalComm, RunOnRanksRethrowsTheFirstRankError) {
  EXPECT_QLM_ERROR(run_on_ranks(3, [](int r) {
                     if (r >= 1) fail("test.rank", {}, "", "rank {} failed", r);
                   }),
                   "test.rank", "rank 1 failed");
}

}  // namespace
}  // namespace qlm
