// Arbitrary bytes as a safetensors image: parse() must either accept or throw qlm::Error, and an
// accepted image must be readable tensor by tensor within bounds.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = qlm::io::SafetensorsFile::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz");
    for (const auto& info : file.tensors()) {
      auto bytes = file.data(info);
      volatile std::byte sink{};
      if (!bytes.empty()) sink = bytes.front() ^ bytes.back();
      (void)sink;
    }
  } catch (const qlm::Error&) {
  }
  return 0;
}
