// EXPECT_QLM_ERROR(statement, code, fragment): `statement` throws qlm::Error whose code() equals
// `code` and whose what() (message with file/tensor context and remedy) contains `fragment`.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace qlm::testing {

inline ::testing::AssertionResult throws_qlm_error(const std::function<void()>& statement, std::string_view statement_text,
                                                   std::string_view code, std::string_view fragment) {
  try {
    statement();
  } catch (const ::qlm::Error& e) {
    const std::string what = e.what();
    if (e.code() != code)
      return ::testing::AssertionFailure() << statement_text << " threw code '" << e.code() << "', expected '" << code
                                           << "'\n  what(): " << what;
    if (what.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << statement_text << " threw '" << code << "' but its message lacks \""
                                           << fragment << "\"\n  what(): " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << statement_text << " threw a non-qlm exception: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << statement_text << " threw an unknown exception";
  }
  return ::testing::AssertionFailure() << statement_text << " did not throw; expected '" << code << "'";
}

}  // namespace qlm::testing

#define EXPECT_QLM_ERROR(statement, code, fragment) \
  EXPECT_TRUE(::qlm::testing::throws_qlm_error([&] { (void)(statement); }, #statement, code, fragment))
#define ASSERT_QLM_ERROR(statement, code, fragment) \
  ASSERT_TRUE(::qlm::testing::throws_qlm_error([&] { (void)(statement); }, #statement, code, fragment))
