// Helpers shared by the WNA16 CUDA kernel tests (tests/cuda/wna16_cuda_test.cc,
// tests/cuda/wna16_fast_cuda_test.cc): the layer config of a random WNA16 spec, its description,
// NaN-poisoned outputs and the mean relative error against the float64 CPU reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/mp_linear.h"
#include "tests/kernels/wna16_random.h"

namespace qlm::testing {

// The mixed-precision layer config for `s` (K_p = K, N_p = N; symmetric weights carry the usual
// 2^(bits-1) bias) on `device` with activations `act`.
MPLinearLayerConfig wna16_config(const Wna16Spec& s, DType act, Device device, int capability);

// "bits=.. K=.. N=.. group=.. zp=.. act_order=.." for SCOPED_TRACE.
std::string wna16_spec_str(const Wna16Spec& s);

// mean |got - want| / mean |want|.
double mean_relative_error(const std::vector<float>& got, const std::vector<float>& want);

// An [M, N] output tensor in `act` on `device` filled with NaN, so unwritten elements show.
Tensor nan_poisoned(int64_t M, int64_t N, DType act, Device device);

}  // namespace qlm::testing
