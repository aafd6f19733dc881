// Errors carry where (file, tensor, layer), what (expected vs found) and a remedy.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace qlm {

// Where an error happened. Empty fields are left out of the message.
struct ErrorContext {
  std::string file;
  std::string tensor;
  std::string layer;
};

// The one exception type qlm throws. `code` is a short stable identifier ("safetensors.header_too_large",
// "config.type", ...) that tests and callers can match; the message is for people.
class Error : public std::runtime_error {
 public:
  Error(std::string code, std::string message, ErrorContext context = {}, std::string remedy = {});

  const std::string& code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const ErrorContext& context() const noexcept { return context_; }
  const std::string& remedy() const noexcept { return remedy_; }

  // A copy with extra context filled in where it was empty (used while an error unwinds through
  // the loader, which knows the file or layer the inner code did not).
  Error with_context(const ErrorContext& outer) const;

 private:
  static std::string format_what(const std::string& code, const std::string& message,
                                 const ErrorContext& context, const std::string& remedy);
  std::string code_;
  std::string message_;
  ErrorContext context_;
  std::string remedy_;
};

// Throws qlm::Error with a message built by fmt.
template <typename... Args>
[[noreturn]] void fail(std::string code, ErrorContext context, std::string remedy,
                       fmt::format_string<Args...> format, Args&&... args) {
  throw Error(std::move(code), fmt::format(format, std::forward<Args>(args)...), std::move(context),
              std::move(remedy));
}

// Internal invariant violated: a bug in qlm, not in the user's input.
#define QLM_CHECK(cond)                                                                       \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::qlm::fail("internal", {}, "please report this as a bug", "check failed: {} ({}:{})", \
                  #cond, __FILE__, __LINE__);                                                 \
  } while (0)

}  // namespace qlm
