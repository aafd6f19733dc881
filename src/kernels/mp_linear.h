// Mixed-precision (weight-only integer) linear kernels: WNA16 for GPTQ, AWQ and compressed-tensors.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"
#include "quant/wna16_weights.h"

namespace qlm {

// What a mixed-precision kernel must implement for one layer (vLLM's MPLinearLayerConfig).
struct MPLinearLayerConfig {
  int64_t K = 0, N = 0;      // full (unsharded) weight shape, [in, out]
  int64_t K_p = 0, N_p = 0;  // this rank's partition
  PackedIntType weight_type = kUint4b8;
  bool zero_points = false;  // runtime zero points (uint4/uint8 types)
  bool has_g_idx = false;    // act-order: group of input row k is g_idx[k]
  int64_t group_size = -1;   // -1: one group spanning K (channelwise)
  DType act_dtype = DType::F32;
  Device device;
  int capability = 0;  // CUDA compute capability (major*10+minor); 0 on CPU
  std::string describe() const;  // "uint4b8 K_p=4096 N_p=1024 group=128 zp=no act_order=no act=F32"
};

class MPLinearKernel {
 public:
  virtual ~MPLinearKernel() = default;
  virtual std::string name() const = 0;
  // Takes this rank's weights in standard form and converts them to the kernel's own layout.
  virtual void prepare(WNA16Weights weights) = 0;
  // y[M, N_p] = x[M, K_p] · W (+ bias[N_p] if bias is non-null). x and y are contiguous F32 on CPU;
  // y is allocated by the caller.
  virtual void run(const Tensor& x, Tensor& y, const Tensor* bias) const = 0;
  // Bytes of the prepared weights (for benchmarks' bandwidth numbers).
  virtual size_t weight_bytes() const = 0;
  // The code path run() takes for M rows ("gemv", "tiled", ...), for benchmarks' records; empty
  // for a kernel with one path.
  virtual std::string path(int64_t M) const {
    (void)M;
    return {};
  }
};

using MPKernelRegistry = KernelRegistry<MPLinearLayerConfig, MPLinearKernel>;
using MPKernelRegistrar = KernelRegistrar<MPLinearLayerConfig, MPLinearKernel>;

}  // namespace qlm
