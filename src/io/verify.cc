#include "io/verify.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "io/checksum.h"

namespace qlm::io {
namespace {

constexpr size_t kChunkBytes = size_t{16} << 20;
constexpr size_t kLookaheadBytes = size_t{64} << 20;

// madvise over the whole pages covering `bytes`. Purely a hint: failures (older kernels, memory
// that is not a file mapping) are ignored.
void advise(std::span<const std::byte> bytes, int advice) {
  if (bytes.empty()) return;
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  const auto end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

// Starts asynchronous readahead of the next chunk, then maps the current one in a single call
// instead of one page fault per page, so disk reads overlap with checksumming.
void prefetch(std::span<const std::byte> current, std::span<const std::byte> next) {
  advise(next, MADV_WILLNEED);
#ifdef MADV_POPULATE_READ
  advise(current, MADV_POPULATE_READ);
#else
  advise(current, MADV_WILLNEED);
#endif
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
    // R13/R14 make the tensors, in offset order, exactly tile the data buffer; so hashing the
    // buffer front to back reads every tensor byte once, and readahead can cross tensor bounds.
    std::span<const std::byte> buffer;
    if (!file->tensors().empty()) {
      const TensorInfo& first = file->tensors().front();
      const TensorInfo& last = file->tensors().back();
      buffer = {file->data(first).data(), static_cast<size_t>(last.end - first.begin)};
    }
    for (size_t offset = 0; offset < buffer.size(); offset += kChunkBytes) {
      auto chunk = buffer.subspan(offset, std::min(kChunkBytes, buffer.size() - offset));
      const size_t next_offset = offset + chunk.size();
      prefetch(chunk, buffer.subspan(next_offset, std::min(kLookaheadBytes, buffer.size() - next_offset)));
      sum.update(chunk);
      entry.bytes += chunk.size();
      report.bytes += chunk.size();
      if (progress) progress(report.bytes, total);
    }
    entry.checksum = sum.digest();
    report.files.push_back(std::move(entry));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.gigabytes_per_second = report.seconds > 0 ? static_cast<double>(report.bytes) / 1e9 / report.seconds : 0;
  return report;
}

}  // namespace qlm::io
