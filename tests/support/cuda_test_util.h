// Helpers shared by the CUDA kernel tests (tests/cuda/wna16_cuda_test.cc, wna16_fast_cuda_test.cc,
// dense_cuda_test.cc, lt_autotune_cuda_test.cc): the layer config of a random WNA16 spec, its description,
// NaN-poisoned outputs, the mean relative and normwise errors, and a kernel run against the float64 CPU
// reference.
#pragma once

#include <cstdint>
#include <functional>
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

// ||got - want||_2 / ||want||_2.
double normwise_error(const std::vector<float>& got, const std::vector<float>& want);

// An [M, N] output tensor in `act` on `device` filled with NaN, so unwritten elements show.
Tensor nan_poisoned(int64_t M, int64_t N, DType act, Device device);

// The WNA16 kernel `kernel_name`, on `device`, with `weights` (of `spec`), against the cpu_ref oracle
// on the same weights, for every M of Ms: fresh random activations rounded to `act` first (the
// oracle sees exactly those values in F32), a bias on odd M, a NaN-poisoned output. Fails the test
// when the kernel cannot implement the layer or leaves an element unwritten or not finite; hands
// every M's outputs (got from the GPU, want from cpu_ref) to `compare`. Returns the prepared kernel's
// weight_bytes().
size_t run_wna16_against_cpu_ref(
    const std::string& kernel_name, const Wna16Spec& spec, const WNA16Weights& weights, DType act, Device device,
    int capability, const std::vector<int64_t>& Ms,
    const std::function<void(int64_t M, const std::vector<float>& got, const std::vector<float>& want)>& compare);

}  // namespace qlm::testing
