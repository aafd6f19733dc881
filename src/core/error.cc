#include "core/error.h"

namespace qlm {

Error::Error(std::string code, std::string message, ErrorContext context, std::string remedy)
    : std::runtime_error(format_what(code, message, context, remedy)),
      code_(std::move(code)),
      message_(std::move(message)),
      context_(std::move(context)),
      remedy_(std::move(remedy)) {}

std::string Error::format_what(const std::string& code, const std::string& message,
                               const ErrorContext& context, const std::string& remedy) {
  std::string out = fmt::format("[{}] ", code);
  if (!context.file.empty()) out += fmt::format("file '{}': ", context.file);
  if (!context.layer.empty()) out += fmt::format("layer '{}': ", context.layer);
  if (!context.tensor.empty()) out += fmt::format("tensor '{}': ", context.tensor);
  out += message;
  if (!remedy.empty()) out += fmt::format(" (remedy: {})", remedy);
  return out;
}

Error Error::with_context(const ErrorContext& outer) const {
  ErrorContext merged = context_;
  if (merged.file.empty()) merged.file = outer.file;
  if (merged.tensor.empty()) merged.tensor = outer.tensor;
  if (merged.layer.empty()) merged.layer = outer.layer;
  return Error(code_, message_, merged, remedy_);
}

}  // namespace qlm
