// The stall watchdog of joined tensor-parallel ranks: a section open past the timeout fires the
// callback once, sections that end in time never do, nesting counts the outermost section, and a
// null watchdog's guard does nothing.
#include "parallel/stall_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.h"

namespace qlm {
namespace {

using namespace std::chrono_literals;

// Waits (up to 10 s, for loaded machines) until `fired` reaches `want`.
bool reaches(const std::atomic<int>& fired, int want) {
  for (int i = 0; i < 1000 && fired.load() < want; ++i) std::this_thread::sleep_for(10ms);
  return fired.load() >= want;
}

TEST(StallWatchdog, ASectionOpenPastTheTimeoutFiresOnce) {
  std::atomic<int> fired{0};
  std::atomic<double> seconds{0};
  StallWatchdog w(50ms, [&](double s) {
    seconds = s;
    ++fired;
  });
  {
    StallWatchdog::Guard g(&w);
    ASSERT_TRUE(reaches(fired, 1));
    std::this_thread::sleep_for(200ms);  // still the same stalled section: no second call
  }
  EXPECT_EQ(fired.load(), 1);
  EXPECT_GE(seconds.load(), 0.05);
  {
    StallWatchdog::Guard g(&w);  // a new section that stalls fires again
    EXPECT_TRUE(reaches(fired, 2));
  }
  EXPECT_EQ(fired.load(), 2);
}

TEST(StallWatchdog, SectionsThatEndInTimeNeverFire) {
  std::atomic<int> fired{0};
  StallWatchdog w(2000ms, [&](double) { ++fired; });
  for (int i = 0; i < 20; ++i) {
    StallWatchdog::Guard g(&w);
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(100ms);  // nothing open: nothing fires
  EXPECT_EQ(fired.load(), 0);
}

TEST(StallWatchdog, NestedSectionsCountTheOutermost) {
  std::atomic<int> fired{0};
  StallWatchdog w(100ms, [&](double) { ++fired; });
  {
    StallWatchdog::Guard outer(&w);
    // Inner sections far shorter than the timeout: only the outer one can be the stalled one.
    for (int i = 0; i < 1000 && fired.load() == 0; ++i) {
      StallWatchdog::Guard inner(&w);
      std::this_thread::sleep_for(10ms);
    }
  }
  EXPECT_EQ(fired.load(), 1);
}

TEST(StallWatchdog, NullGuardAndBadArguments) {
  { StallWatchdog::Guard g(nullptr); }
  EXPECT_THROW(StallWatchdog(0ms, [](double) {}), Error);
  EXPECT_THROW(StallWatchdog(10ms, nullptr), Error);
}

}  // namespace
}  // namespace qlm
