// A read-only, private memory mapping of a whole regular file (R18 of RELIABILITY.md §B.1).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace qlm::io {

class MappedFile {
 public:
  // Throws "safetensors.io" when the file cannot be opened, is not a regular file, or cannot be
  // mapped. An empty file is not mapped (mmap of length 0 fails); bytes() is then empty.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Exactly the size fstat reported when the file was opened; nothing beyond it is ever exposed.
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qlm::io
