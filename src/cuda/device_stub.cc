// Builds without the CUDA backend: no devices.
#ifndef QLM_WITH_CUDA
#include "core/error.h"
#include "cuda/device.h"

namespace qlm {

bool cuda_backend_built() { return false; }
std::vector<CudaDeviceInfo> cuda_devices() { return {}; }
int cuda_capability(int index) {
  fail("cuda.unavailable", {}, "rebuild with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
       "this qlm was built without the CUDA backend; device cuda:{} is not available", index);
}

}  // namespace qlm
#endif
