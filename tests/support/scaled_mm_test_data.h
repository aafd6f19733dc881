// Random weights and activations shared by the scaled-mm (W8A8 / W8A16) CUDA kernel tests
// (tests/cuda/scaled_mm_cuda_test.cc, scaled_mm_fp8_fast_cuda_test.cc, scaled_mm_int8_fast_cuda_test.cc), the cpu_ref
// oracle's output for them, a kernel's output on a NaN-poisoned device tensor, and the bit-identity check of the W8A8
// streaming GEMM's own activation quantization.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/scaled_mm.h"

namespace qlm::testing {

struct ScaledMMWeightSpec {
  W8Type type = W8Type::Fp8E4M3;
  WeightScaleKind ws = WeightScaleKind::Tensor;
  bool sym = true;      // symmetric activations (asymmetric ones get input zero point 7)
  int64_t block = 128;  // block scales: block_k (and block_n)
  int64_t phase = 0;    // block scales: k_phase
};

// A W8A8 layer variant the streaming kernels' tests sweep: how the weights and the activations are scaled.
struct W8A8Variant {
  WeightScaleKind ws;
  ActScheme act;
};

// Tensor / channel weight scales x dynamic per-token, static per-tensor and dynamic per-tensor activations.
const std::vector<W8A8Variant>& w8a8_variants();

// A parameterized test's name for variant v ("Channel_DynamicToken").
std::string w8a8_variant_name(const W8A8Variant& v);

// The layer config of variant v: `type` weights [N, K], symmetric activations in `act`, on `device` of `capability`.
ScaledMMConfig w8a8_variant_config(W8Type type, const W8A8Variant& v, int64_t N, int64_t K, DType act, Device device,
                                   int capability);

// With QLM_TEST_TRACE set, prints "run <what>" (flushed) before a kernel runs: the last line names the run that hangs
// when the GPU check's time limit kills the test.
void trace_test_run(const std::string& what);

// The W8A8 bound of the CUDA issue: relative mean error <= 2e-3 with BF16 activations (1e-3 with F16 / F32).
double w8a8_tolerance(DType act);

// Weights [N, K]: e4m3 codes of uniform values in [-300, 300] or uniform int8 bytes; a tensor scale
// of 0.0123, or channel / block scales in [0.001, 0.011); input scale 1/32.
ScaledMMWeights random_scaled_mm_weights(const ScaledMMWeightSpec& s, int64_t N, int64_t K, uint64_t seed);

// A deep copy (kernels take their weights by value and may keep the tensors).
ScaledMMWeights clone_weights(const ScaledMMWeights& w);

// Activations [M, K] uniform in [-3, 3), rounded to `act` (returned as the F32 values every side
// sees); with M > 2, row 1 all zero (scale floor) and row 2 tiny values (FP8 subnormals).
std::vector<float> scaled_mm_test_acts(int64_t M, int64_t K, DType act, uint64_t seed);

// Kernel `kernel` created for layer `c` and prepared with (a copy of) `w` while the environment settings `env`
// (name, value) are set; they are unset again afterwards (kernels read their switches in prepare()).
std::unique_ptr<ScaledMMKernel> make_scaled_mm_kernel(const char* kernel, const ScaledMMConfig& c,
                                                      const ScaledMMWeights& w,
                                                      const std::vector<std::pair<std::string, std::string>>& env = {});

// Per-token activation codes: the code bytes [M * K] (e4m3 or int8) and scales [M].
struct TokenCodes {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

// The layer config the per-token quantizers read: dynamic per-token symmetric INT8 (`int8`) or FP8 e4m3 activations
// of width K in `act` on `device` (capability 0 on the CPU, else the GPU's), a tensor-scaled weight of 16 rows.
ScaledMMConfig token_quant_config(bool int8, int64_t K, DType act, Device device);

// The CPU quantizer's dynamic per-token symmetric codes (quantize_acts_int8 / quantize_acts_fp8) of x [M, K] (F32
// values exact in `act`), INT8 (`int8`) or FP8 e4m3: what every GPU quantizer must give bit for bit.
TokenCodes cpu_token_codes(const std::vector<float>& x, int64_t M, int64_t K, DType act, bool int8);

#ifdef QLM_WITH_CUDA
// launch_w8a8_quant_token with INT8 (`int8`) or FP8 e4m3 codes on x [M, K] (F32 values exact in `act`) on GPU 0, into
// poisoned outputs (codes 0x5a, scales NaN: every one must be written); a failed launch fails the test.
TokenCodes gpu_token_codes(const std::vector<float>& x, int64_t M, int64_t K, DType act, bool int8, bool pdl);

// The streaming W8A8 kernel `kernel` (switches `env_prefix`_FAST_MAX_M and `env_prefix`_CUTLASS_CONFIG) on `type`
// weights [N, K] of variant v against cpu_ref, for each activation dtype and M (x seeded act_seed_mul * M + K, the
// weights weight_seed + N + K; a bias on odd M): the streaming kernel forced at every M, the default rule, and each
// large-M path of w8a8_cutlass_paths above 16 tokens; every output finite and within w8a8_tolerance. Needs a GPU that
// runs the kernel.
void check_w8a8_streaming_kernel(const char* kernel, const std::string& env_prefix, W8Type type, const W8A8Variant& v,
                                 int64_t N, int64_t K, const std::vector<DType>& dtypes, const std::vector<int64_t>& Ms,
                                 uint64_t weight_seed, uint64_t act_seed_mul);

// The large-M paths a W8A8 kernel test checks besides the default rule, as values of <prefix>_CUTLASS_CONFIG:
// cuBLASLt ("off"), and each CUTLASS configuration where this build and layer `c`'s device run them.
std::vector<std::string> w8a8_cutlass_paths(const ScaledMMConfig& c);
#endif

// cpu_ref's output [M, N] for layer `c` (run on the CPU in F32) on x [M, K] (F32 values) and an optional bias.
std::vector<float> scaled_mm_cpu_ref(ScaledMMConfig c, const ScaledMMWeights& w, const std::vector<float>& x, int64_t M,
                                     const std::vector<float>* bias);

// Kernel `k` of layer `c` (on its device) on x [M, K] rounded to c.act_dtype, writing into a NaN-poisoned output;
// the output as F32 values.
std::vector<float> run_scaled_mm_kernel(const ScaledMMKernel& k, const ScaledMMConfig& c, const std::vector<float>& x,
                                        int64_t M, const std::vector<float>* bias);

// The W8A8 streaming GEMM `kernel` (cuda_scaled_mm_fp8_fast or cuda_scaled_mm_int8_fast, whose switches are named
// `env_prefix`_...) on `type` codes with dynamic per-token activations: quantizing its activations itself (by default
// at one token; up to 4 with <prefix>_FUSED_QUANT_MAX_M=4) gives bit for bit the output of its quantizer, GEMM and
// reduction kernels, for BF16 / F16 / F32, tensor and channel weight scales, bias or none, K split by the rule, in one
// slice or in three, a token of zeros and a token with one large value; and its path names say which ran. Needs a GPU
// that runs the kernel.
void check_quantizing_in_the_gemm(W8Type type, const char* kernel, const std::string& env_prefix);

}  // namespace qlm::testing
