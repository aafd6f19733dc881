// Builds safetensors images byte by byte, including malformed ones, for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qlm::testing {

// 8-byte little-endian length (header.size() unless `declared_length` is given) + header + data.
inline std::string raw_safetensors(std::string_view header, std::string_view data = {},
                                   std::optional<uint64_t> declared_length = std::nullopt) {
  const uint64_t length = declared_length.value_or(header.size());
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  out.append(header);
  out.append(data);
  return out;
}

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace qlm::testing
