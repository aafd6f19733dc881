// Arbitrary text through the strict JSON parser used for config.json and friends.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)qlm::io::parse_json_strict({reinterpret_cast<const char*>(data), size}, "fuzz.config.json");
  } catch (const qlm::Error&) {
  }
  return 0;
}
