// safetensors: a hardened mmap reader that enforces every container rule (R1-R18 of
// shared/reference/RELIABILITY.md §B.1) before any tensor byte is touched, and a writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace qlm::io {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // R2

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the byte buffer (after the header)
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

class MappedFile;  // read-only mmap of a whole file

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates it; every violation throws qlm::Error with a code
  // "safetensors.<rule>" naming the file, the tensor, and expected vs found.
  static SafetensorsFile open(const std::filesystem::path& path);
  // Validates an in-memory image (same rules; used by the fuzzer and tests). `bytes` must outlive
  // the returned object.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string source_name);

  const std::string& source_name() const { return source_name_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint64_t header_size() const { return header_size_; }
  // Tensors sorted by data offset.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr if absent
  const TensorInfo& info(std::string_view name) const;  // "safetensors.missing_tensor" if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's bytes inside the mapping (validated bounds).
  std::span<const std::byte> data(const TensorInfo& info) const;
  // The tensor as a host Tensor: a borrowed view when the data is aligned for its dtype, else an
  // owned aligned copy (R17: never a misaligned typed pointer).
  Tensor tensor(std::string_view name) const;

 private:
  std::string source_name_;
  std::shared_ptr<const MappedFile> mapping_;  // null for parse()
  std::span<const std::byte> bytes_;
  uint64_t header_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any strides; written contiguous) with optional __metadata__. Header keys are
// sorted by name; data is ordered by element size (largest first), then name, and the header is
// padded with spaces to a multiple of 8, so every tensor is aligned for its dtype. Throws
// "safetensors.duplicate_key", "safetensors.metadata" (a tensor named __metadata__),
// "safetensors.utf8", "safetensors.header_too_large" or "safetensors.write".
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same file image in memory.
std::vector<std::byte> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                             const std::map<std::string, std::string>& metadata = {});

}  // namespace qlm::io
