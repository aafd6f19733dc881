#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace qlm {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t tasks : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      for (int repeat = 0; repeat < 20; ++repeat) pool.run(tasks, [&](int64_t t) { hits[t].fetch_add(1); });
      for (int64_t t = 0; t < tasks; ++t) EXPECT_EQ(hits[t].load(), 20) << "task " << t;
    }
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeInChunks) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(1003);
  std::atomic<int> chunks{0};
  pool.parallel_for(3, 1003, 10, [&](int64_t b, int64_t e) {
    chunks.fetch_add(1);
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  EXPECT_LE(chunks.load(), 2);
  for (int64_t i = 0; i < 1003; ++i) EXPECT_EQ(hits[i].load(), i >= 3 ? 1 : 0);
  chunks = 0;
  pool.parallel_for(0, 5, 10, [&](int64_t b, int64_t e) { chunks.fetch_add(1); });
  EXPECT_EQ(chunks.load(), 1);  // fewer items than one grain: one chunk
}

TEST(ThreadPool, NestedRegionsRunInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.run(4, [&](int64_t) { pool.run(3, [&](int64_t) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, RethrowsTheFirstException) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run(100, [&](int64_t t) {
    if (t == 37) throw std::runtime_error("task failed");
  }),
               std::runtime_error);
  std::atomic<int> after{0};
  pool.run(10, [&](int64_t) { after.fetch_add(1); });  // the pool still works
  EXPECT_EQ(after.load(), 10);
}

TEST(ThreadPool, ComputePoolFollowsSetting) {
  set_compute_threads(1);
  EXPECT_EQ(compute_threads(), 1);
  set_compute_threads(2);
  EXPECT_EQ(compute_threads(), 2);
  set_compute_threads(0);
  EXPECT_EQ(compute_threads(), ThreadPool::available_cores());
}

}  // namespace
}  // namespace qlm
