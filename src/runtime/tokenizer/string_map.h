// Hash map from strings that can be probed with a std::string_view without building a string.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace qlm::runtime::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

}  // namespace qlm::runtime::tok
