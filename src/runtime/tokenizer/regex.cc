#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/regex.h"

#include <pcre2.h>

#include <memory>

#include "core/error.h"
#include "runtime/tokenizer/unicode.h"

namespace qlm::runtime::tok {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread JIT stack: the default 32 KiB can be too small for long whitespace runs under
// patterns such as \s+(?!\S). Created once per thread, released at thread exit.
struct JitResources {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  JitResources() {
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack != nullptr && context != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~JitResources() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local JitResources resources;
  return resources.context;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

Regex::Regex(std::string_view pattern, const std::string& file, const std::string& where) : pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(), PCRE2_UTF | PCRE2_UCP,
                        &error_code, &error_offset, nullptr);
  if (code_ == nullptr)
    fail("tokenizer.regex", ErrorContext{file, "", ""}, "the pattern must be a valid Oniguruma/PCRE regex",
         "{}: pattern \"{}\" does not compile at offset {}: {}", where, pattern_, error_offset, pcre2_message(error_code));
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is used if JIT is unavailable
}

Regex::~Regex() { pcre2_code_free(code_); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create_from_pattern(code_, nullptr));
  pcre2_match_context* context = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data.get(), context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      fail("tokenizer.regex", {}, "report the input that triggers this", "matching pattern \"{}\" failed: {}", pattern_,
           pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0], end = ovector[1];
    matches.emplace_back(begin, end);
    if (end > begin) {
      offset = end;
    } else {
      if (end >= text.size()) break;
      const Utf8Step step = utf8_step(text, end);
      offset = end + step.length;
    }
  }
  return matches;
}

}  // namespace qlm::runtime::tok
