#ifdef QLM_WITH_CUDA
#include "cuda/context.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "cuda/cublas_check.h"
#include "cuda/cuda_check.h"
#include "cuda/device.h"

namespace qlm {

void throw_cublas_error(const char* call, cublasStatus_t status, const char* file, int line) {
  fail("cuda.cublas", {}, "check the GPU's free memory and that the shapes and dtypes are supported by cuBLAS",
       "{} failed: {} ({}) at {}:{}", call, cublasGetStatusName(status), cublasGetStatusString(status), file, line);
}

namespace cuda {

namespace {
constexpr size_t kLtWorkspace = size_t{32} << 20;

std::unique_ptr<Context> create(int index) {
  auto devices = cuda_devices();
  if (index < 0 || index >= static_cast<int>(devices.size()))
    fail("cuda.unavailable", {}, "choose a device index below the count, or run with --device cpu",
         "cuda:{} requested but {} CUDA device(s) are visible", index, devices.size());
  auto ctx = std::make_unique<Context>();
  ctx->device = index;
  set_device(index);
  cudaDeviceProp prop{};
  QLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  ctx->capability = prop.major * 10 + prop.minor;
  ctx->sm_count = prop.multiProcessorCount;
  ctx->l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  QLM_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  QLM_CUBLAS_CHECK(cublasCreate(&ctx->cublas));
  QLM_CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
  QLM_CUBLAS_CHECK(cublasLtCreate(&ctx->cublas_lt));
  QLM_CUDA_CHECK(cudaMalloc(&ctx->lt_workspace, kLtWorkspace));
  ctx->lt_workspace_bytes = kLtWorkspace;
  // cuBLAS gets the same workspace so its kernel choice does not depend on allocations.
  QLM_CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->lt_workspace, ctx->lt_workspace_bytes));
  return ctx;
}
}  // namespace

// The device this thread last made current through set_device(): every op asks for its device's
// context, and skipping a cudaSetDevice that changes nothing keeps that cheap. Code of the backend
// changes the current device only through set_device(), which keeps this in step.
thread_local int current_device = -1;

void set_device(int index) {
  if (current_device == index) return;
  QLM_CUDA_CHECK(cudaSetDevice(index));
  current_device = index;
}

// Contexts live for the process (leaked: the driver tears them down at exit). Once created, a
// context is found without taking the lock.
Context& context(int index) {
  static std::mutex mutex;
  static auto* contexts = new std::array<std::atomic<Context*>, 64>{};
  if (index < 0 || index >= 64)
    fail("cuda.unavailable", {}, "choose a device index below the count", "cuda:{} is not a valid device", index);
  std::atomic<Context*>& slot = (*contexts)[static_cast<size_t>(index)];
  Context* ctx = slot.load(std::memory_order_acquire);
  if (ctx == nullptr) {
    std::lock_guard lock(mutex);
    ctx = slot.load(std::memory_order_acquire);
    if (ctx == nullptr) {
      ctx = create(index).release();
      slot.store(ctx, std::memory_order_release);
    }
  }
  set_device(index);
  return *ctx;
}

void synchronize(int index) { QLM_CUDA_CHECK(cudaStreamSynchronize(context(index).stream)); }

}  // namespace cuda
}  // namespace qlm
#endif
