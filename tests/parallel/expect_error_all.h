// EXPECT_QLM_ERROR_ALL(statement, code, fragment, ...): like EXPECT_QLM_ERROR, with every fragment
// required in the error's what().
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace qlm::testing {

inline ::testing::AssertionResult throws_qlm_error_all(const std::function<void()>& statement, const char* text,
                                                       const std::string& code,
                                                       std::initializer_list<std::string> fragments) {
  try {
    statement();
  } catch (const ::qlm::Error& e) {
    const std::string what = e.what();
    if (e.code() != code)
      return ::testing::AssertionFailure()
             << text << " threw code '" << e.code() << "', expected '" << code << "'\n  what(): " << what;
    for (const std::string& f : fragments)
      if (what.find(f) == std::string::npos)
        return ::testing::AssertionFailure()
               << text << " threw '" << code << "' but its message lacks \"" << f << "\"\n  what(): " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << text << " threw a non-qlm exception: " << e.what();
  }
  return ::testing::AssertionFailure() << text << " did not throw; expected '" << code << "'";
}

}  // namespace qlm::testing

#define EXPECT_QLM_ERROR_ALL(statement, code, ...) \
  EXPECT_TRUE(::qlm::testing::throws_qlm_error_all([&] { (void)(statement); }, #statement, code, {__VA_ARGS__}))
