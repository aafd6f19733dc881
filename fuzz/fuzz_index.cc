// Arbitrary text as model.safetensors.index.json: accepted or a qlm::Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)qlm::io::parse_index_json({reinterpret_cast<const char*>(data), size}, "fuzz.index.json");
  } catch (const qlm::Error&) {
  }
  return 0;
}
