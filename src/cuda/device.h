// CUDA devices as the rest of qlm sees them. Declared in every build; without the CUDA backend
// the list is empty and capability queries say so.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace qlm {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int capability = 0;  // major*10 + minor, e.g. 90 for H100/H200
  size_t total_memory = 0;
};

// True when this build includes the CUDA backend.
bool cuda_backend_built();
// Visible devices (empty without the backend, a driver or a GPU).
std::vector<CudaDeviceInfo> cuda_devices();
// Capability of device `index`; throws "cuda.unavailable" naming why there is none.
int cuda_capability(int index);

}  // namespace qlm
