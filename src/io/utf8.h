// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace qlm::io {

// The offset of the first byte that does not start or continue a valid sequence; nullopt if the
// whole text is valid UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace qlm::io
