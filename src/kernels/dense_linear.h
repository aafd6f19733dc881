// Dense (unquantized) linear kernels: weights in F32/F16/BF16.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"

namespace qlm {

struct DenseLinearConfig {
  int64_t K_p = 0, N_p = 0;
  DType weight_dtype = DType::F32;
  DType act_dtype = DType::F32;
  Device device;
  int capability = 0;
  std::string describe() const;
};

class DenseLinearKernel {
 public:
  virtual ~DenseLinearKernel() = default;
  virtual std::string name() const = 0;
  // weight: [N_p, K_p] (nn.Linear layout), any float dtype; the kernel converts/repacks it.
  virtual void prepare(const Tensor& weight) = 0;
  // y[M, N_p] = x[M, K_p] · weightᵀ (+ bias). x, y contiguous F32 on CPU.
  virtual void run(const Tensor& x, Tensor& y, const Tensor* bias) const = 0;
  virtual size_t weight_bytes() const = 0;
  // The prepared weight [N_p, K_p] in the activation dtype on the layer's device, where the kernel keeps it in
  // that plain form (cuda_cublas_dense), for a consumer that multiplies it itself (the fused MoE router); null
  // otherwise.
  virtual const Tensor* device_weight() const { return nullptr; }
};

using DenseKernelRegistry = KernelRegistry<DenseLinearConfig, DenseLinearKernel>;
using DenseKernelRegistrar = KernelRegistrar<DenseLinearConfig, DenseLinearKernel>;

}  // namespace qlm
