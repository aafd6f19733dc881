#include "core/mode_switch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace qlm {
namespace {

// Each case uses its own variable: a switch reads the environment once, on first use.
TEST(ModeSwitch, EnvironmentDecidesUntilForced) {
  ::setenv("QLM_TEST_MODE_SWITCH_A", "1", 1);
  ModeSwitch s("QLM_TEST_MODE_SWITCH_A");
  EXPECT_EQ(s.mode(), 1);
  s.force(0);
  EXPECT_EQ(s.mode(), 0);
  s.force(2);
  EXPECT_EQ(s.mode(), 2);
  s.force(-1);  // back to the environment
  EXPECT_EQ(s.mode(), 1);
  ::unsetenv("QLM_TEST_MODE_SWITCH_A");
}

TEST(ModeSwitch, UnsetOrEmptyLeavesTheRule) {
  ::unsetenv("QLM_TEST_MODE_SWITCH_B");
  ModeSwitch unset("QLM_TEST_MODE_SWITCH_B");
  EXPECT_EQ(unset.mode(), -1);
  ::setenv("QLM_TEST_MODE_SWITCH_C", "", 1);
  ModeSwitch empty("QLM_TEST_MODE_SWITCH_C");
  EXPECT_EQ(empty.mode(), -1);
  ::unsetenv("QLM_TEST_MODE_SWITCH_C");
}

TEST(ModeSwitch, ReadsTheEnvironmentOnce) {
  ::setenv("QLM_TEST_MODE_SWITCH_D", "0", 1);
  ModeSwitch s("QLM_TEST_MODE_SWITCH_D");
  EXPECT_EQ(s.mode(), 0);
  ::setenv("QLM_TEST_MODE_SWITCH_D", "1", 1);
  EXPECT_EQ(s.mode(), 0);
  ::unsetenv("QLM_TEST_MODE_SWITCH_D");
}

}  // namespace
}  // namespace qlm
