// Device memory for tensors: a caching allocator on plain cudaMalloc. Freed blocks are kept per
// device and size class and handed out again, so steady-state decoding never calls cudaMalloc.
// Reuse is safe without events because all of qlm's device work runs on one stream per device
// (cuda/context.h): work that used a block is ordered before any later user of it.
//
// CUDA graphs (cuda/graph.h) bake the addresses of what they use into the graph. While a capture
// runs, allocations come from a second pool, private to captures, and its blocks go back only to
// it: a tensor allocated outside a capture can never take a block a captured graph uses as scratch,
// where a replay would overwrite it.
#ifdef QLM_WITH_CUDA
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/device_memory.h"
#include "core/error.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"

namespace qlm::cuda {
namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // up to 1 MiB: 512-byte classes
constexpr size_t kLargeUnit = size_t{2} << 20;   // above: whole 2 MiB units

size_t round_size(size_t nbytes) {
  if (nbytes == 0) return 512;
  if (nbytes <= kSmallLimit) return (nbytes + 511) / 512 * 512;
  return (nbytes + kLargeUnit - 1) / kLargeUnit * kLargeUnit;
}

struct DevicePool {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;    // size -> block
  std::multimap<size_t, void*> capture_free;   // the same for blocks of the capture pool
  std::unordered_map<void*, size_t> sizes;     // every live or cached block
  std::unordered_set<void*> capture_blocks;    // blocks of the capture pool (never returned to the driver)
  int capturing = 0;                           // captures running on this device
  MemoryStats stats;
};

// Leaked on purpose: tensors in static objects may be released after other statics are gone.
DevicePool& pool(int index) {
  static auto* pools = new std::vector<DevicePool>(64);
  QLM_CHECK(index >= 0 && index < 64);
  return (*pools)[static_cast<size_t>(index)];
}

void release_cached(DevicePool& p) {
  for (auto& [size, block] : p.free_blocks) {
    cudaFree(block);
    p.sizes.erase(block);
    p.stats.cached -= size;
  }
  p.free_blocks.clear();
}

void* allocate(size_t nbytes, int index) {
  const size_t size = round_size(nbytes);
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  // Take a cached block of the same class, or one at most 1/8 larger (large classes).
  auto& cached = p.capturing > 0 ? p.capture_free : p.free_blocks;
  auto it = cached.lower_bound(size);
  if (it != cached.end() && it->first <= size + size / 8) {
    void* block = it->second;
    p.stats.cached -= it->first;
    p.stats.in_use += it->first;
    cached.erase(it);
    p.stats.peak_in_use = std::max(p.stats.peak_in_use, p.stats.in_use);
    return block;
  }
  set_device(index);
  void* block = nullptr;
  cudaError_t status = cudaMalloc(&block, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    release_cached(p);
    status = cudaMalloc(&block, size);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("cuda.oom", {}, "use a smaller model, fewer tokens at once, or more tensor-parallel GPUs",
         "out of memory on cuda:{} allocating {:.1f} MiB: {:.1f} MiB in use by qlm, {:.1f} MiB free of {:.1f} MiB ({})",
         index, size / 1048576.0, p.stats.in_use / 1048576.0, free_bytes / 1048576.0, total_bytes / 1048576.0,
         cudaGetErrorString(status));
  }
  p.sizes[block] = size;
  if (p.capturing > 0) p.capture_blocks.insert(block);
  p.stats.in_use += size;
  p.stats.peak_in_use = std::max(p.stats.peak_in_use, p.stats.in_use);
  ++p.stats.cuda_malloc_calls;
  return block;
}

void release(void* ptr, size_t, int index) noexcept {
  if (ptr == nullptr) return;
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  auto it = p.sizes.find(ptr);
  if (it == p.sizes.end()) return;  // not ours: never happens for tensors made by allocate()
  p.stats.in_use -= it->second;
  p.stats.cached += it->second;
  (p.capture_blocks.contains(ptr) ? p.capture_free : p.free_blocks).emplace(it->second, ptr);
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  const int index = dst_device.is_cpu() ? src_device.index : dst_device.index;
  Context& ctx = context(index);
  QLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx.stream));
  // The host may read or free its side as soon as this returns.
  if (dst_device.is_cpu() || src_device.is_cpu()) QLM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void zero(void* ptr, size_t nbytes, int index) {
  QLM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, nbytes, context(index).stream));
}

const bool registered = [] {
  register_device_memory(DeviceType::CUDA, DeviceMemoryOps{&allocate, &release, &copy, &zero});
  return true;
}();

}  // namespace

MemoryStats memory_stats(int index) {
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  return p.stats;
}

void empty_cache(int index) {
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  release_cached(p);
}

void begin_capture_allocations(int index) {
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  ++p.capturing;
}

void end_capture_allocations(int index) {
  DevicePool& p = pool(index);
  std::lock_guard lock(p.mutex);
  QLM_CHECK(p.capturing > 0);
  --p.capturing;
}

}  // namespace qlm::cuda
#endif
