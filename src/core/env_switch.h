// Process-wide tuning and diagnosis switches read from the environment (docs/cli.md, "Environment
// variables"). Header-only and free of qlm types, so CUDA sources and the C++17 launchers can use it.
// Callers read a switch once (a function-local static): they change which code path runs, never what
// a layer computes.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace qlm {

// A feature that is on by default: off only when NAME is exactly "0".
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v != nullptr && std::strcmp(v, "0") == 0);
}

// An integer setting: NAME's value, or `fallback` when it is unset or empty.
inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

}  // namespace qlm
