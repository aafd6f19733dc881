// Builds with the CUDA backend: devices from the CUDA runtime.
#ifdef QLM_WITH_CUDA
#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/device.h"

namespace qlm {

void throw_cuda_error(const char* call, cudaError_t status, const char* file, int line) {
  fail("cuda.error", {}, "check the driver, the GPU's memory and that the GPU is visible",
       "{} failed: {} ({}) at {}:{}", call, cudaGetErrorName(status), cudaGetErrorString(status), file, line);
}

bool cuda_backend_built() { return true; }

std::vector<CudaDeviceInfo> cuda_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return {};
  }
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    QLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    devices.push_back({i, prop.name, prop.major * 10 + prop.minor, prop.totalGlobalMem});
  }
  return devices;
}

int cuda_capability(int index) {
  auto devices = cuda_devices();
  if (index < 0 || index >= static_cast<int>(devices.size()))
    fail("cuda.unavailable", {}, "choose a device index below the count, or run on cpu",
         "cuda:{} requested but {} CUDA device(s) are visible", index, devices.size());
  return devices[static_cast<size_t>(index)].capability;
}

}  // namespace qlm
#endif
