// Scaled-mm linear kernels: 8-bit weights (INT8 or FP8 e4m3) with per-tensor, per-channel or block
// weight scales, and 8-bit activations quantized statically or dynamically (W8A8), or float
// activations (W8A16). vLLM's FP8ScaledMM / Fp8BlockScaledMM / Int8ScaledMM families (FORMATS.md
// §5.3, §6). A method hands its weights over in one standard form (ScaledMMWeights); each kernel
// repacks them once in prepare().
//
// Numerics every kernel implements (codes q, scales s; FORMATS.md §6):
//   y[m, n] = s_x(m, k) * s_w(n, k) * sum_k (q_x[m, k] - z_x(m)) * q_w[n, k]   (+ bias[n])
// where the scales are constant over a whole k range except for block scales (per k-block), and
// the activation codes come from the quantizers in kernels/cpu/scaled_mm_act_quant.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"

namespace qlm {

enum class W8Type : uint8_t { Int8, Fp8E4M3 };
enum class WeightScaleKind : uint8_t { Tensor, Channel, Block };
// How activations are quantized. None: float activations (weight-only W8A16).
enum class ActScheme : uint8_t { None, StaticTensor, DynamicTensor, DynamicToken, DynamicTokenGroup };

const char* w8_type_name(W8Type t);
const char* weight_scale_kind_name(WeightScaleKind k);
const char* act_scheme_name(ActScheme a);

struct ScaledMMConfig {
  int64_t K_p = 0, N_p = 0;  // this rank's partition
  W8Type weight_type = W8Type::Fp8E4M3;
  WeightScaleKind weight_scale = WeightScaleKind::Tensor;
  int64_t block_n = 0, block_k = 0;  // Block only
  ActScheme act = ActScheme::DynamicToken;
  int64_t act_group = 0;      // DynamicTokenGroup: columns per activation scale (= block_k)
  bool act_symmetric = true;  // false: INT8 activations with a zero point (StaticTensor / DynamicToken)
  DType act_dtype = DType::F32;
  Device device;
  int capability = 0;
  std::string describe() const;  // "int8 w=channel act=dynamic_token sym K_p=4096 N_p=1024"
};

// One rank's weights in standard form.
struct ScaledMMWeights {
  int64_t K = 0, N = 0;  // K_p, N_p
  Tensor codes;          // [N, K] I8 or F8_E4M3 (nn.Linear layout), contiguous
  // F32 dequantization multipliers: Tensor [1]; Channel [N]; Block [N, KB], one row per output
  // (block rows expanded, so shards and fused parts need not align to block_n).
  Tensor weight_scale;
  int64_t block_k = 0;   // Block: local column k uses scale column (k + k_phase) / block_k
  int64_t k_phase = 0;   // global k of local column 0, modulo block_k
  float input_scale = 0;          // StaticTensor
  int32_t input_zero_point = 0;   // StaticTensor, asymmetric INT8
};

class ScaledMMKernel {
 public:
  virtual ~ScaledMMKernel() = default;
  virtual std::string name() const = 0;
  virtual void prepare(ScaledMMWeights weights) = 0;
  // y[M, N_p] = x[M, K_p] · Wᵀ (+ bias). x, y contiguous F32 on CPU; y allocated by the caller.
  virtual void run(const Tensor& x, Tensor& y, const Tensor* bias) const = 0;
  virtual size_t weight_bytes() const = 0;
  // The code path run() takes for M rows, for benchmarks' records; empty for a kernel with one path.
  virtual std::string path(int64_t M) const {
    (void)M;
    return {};
  }
};

using ScaledMMKernelRegistry = KernelRegistry<ScaledMMConfig, ScaledMMKernel>;
using ScaledMMKernelRegistrar = KernelRegistrar<ScaledMMConfig, ScaledMMKernel>;

// Shared can_implement checks of the standard form (dtype of codes vs config, shapes).
std::optional<std::string> scaled_mm_common_reason(const ScaledMMConfig& c);
// Validates `w` against `c` (QLM_CHECK-level: a method bug, not user input).
void check_scaled_mm_weights(const ScaledMMConfig& c, const ScaledMMWeights& w);

}  // namespace qlm
