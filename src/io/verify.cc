#include "io/verify.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "io/checksum.h"

namespace qlm::io {
namespace {

constexpr size_t kChunkBytes = size_t{32} << 20;

// Asks the kernel to read ahead and map the next chunk in one go instead of one fault per page.
// Purely a hint: failures (older kernels, non-mmap spans) are ignored.
void prefetch(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  const auto end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  void* addr = reinterpret_cast<void*>(begin);
#ifdef MADV_POPULATE_READ
  if (::madvise(addr, end - begin, MADV_POPULATE_READ) == 0) return;
#endif
  ::madvise(addr, end - begin, MADV_WILLNEED);
}

}  // namespace

VerifyReport verify_checkpoint_data(const Checkpoint& checkpoint, const VerifyProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t total = 0;
  for (const auto& file : checkpoint.files())
    for (const TensorInfo& t : file->tensors()) total += t.nbytes();

  VerifyReport report;
  for (const auto& file : checkpoint.files()) {
    StreamChecksum sum;
    FileChecksum entry{file->source_name(), 0, 0};
    for (const TensorInfo& t : file->tensors()) {  // offset order: the data buffer front to back
      std::span<const std::byte> bytes = file->data(t);
      for (size_t offset = 0; offset < bytes.size(); offset += kChunkBytes) {
        auto chunk = bytes.subspan(offset, std::min(kChunkBytes, bytes.size() - offset));
        prefetch(chunk);
        sum.update(chunk);
        entry.bytes += chunk.size();
        report.bytes += chunk.size();
        if (progress) progress(report.bytes, total);
      }
    }
    entry.checksum = sum.digest();
    report.files.push_back(std::move(entry));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.gigabytes_per_second = report.seconds > 0 ? static_cast<double>(report.bytes) / 1e9 / report.seconds : 0;
  return report;
}

}  // namespace qlm::io
