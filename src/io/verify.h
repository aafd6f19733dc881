// Reads every tensor byte of a checkpoint (the part Checkpoint::open never touches) and checksums
// it: proves the data is readable end to end (no I/O errors, no truncation behind the mapping) and
// gives per-file fingerprints to compare across copies. Used by `qlm inspect --verify-data`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace qlm::io {

struct FileChecksum {
  std::string file;       // SafetensorsFile::source_name()
  uint64_t bytes = 0;     // tensor bytes read (the whole data buffer)
  uint64_t checksum = 0;  // StreamChecksum over the tensors' bytes in offset order
};

struct VerifyReport {
  uint64_t bytes = 0;
  double seconds = 0;
  double gigabytes_per_second = 0;  // 1 GB = 1e9 bytes
  std::vector<FileChecksum> files;  // in Checkpoint::files() order
};

// Called after each chunk with (bytes done, bytes total) over the whole checkpoint.
using VerifyProgress = std::function<void(uint64_t done, uint64_t total)>;

VerifyReport verify_checkpoint_data(const Checkpoint& checkpoint, const VerifyProgress& progress = {});

}  // namespace qlm::io
