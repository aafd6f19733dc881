// Test-side quantizers: turn a float weight matrix into the checkpoint tensors of each weight-only
// integer format exactly as the producing tools lay them out (FORMATS.md §3.1-3.3, §11.1), together
// with the exact dequantized reference weight.
//
// Two stages, so that one integer matrix can be written in every format:
//   1. quantize_*()  float W [K, N] (row k = input feature) -> IntQuant: unsigned codes, true zero
//      points, scales (already rounded to the checkpoint's scale dtype) and the group of every row.
//      An IntQuant may also be filled by hand (bit-exact cross-format tests).
//   2. encode_*()    IntQuant -> named checkpoint tensors ("qweight", "scales", ...), the names
//      being the suffixes after the module prefix ("model.layers.0.mlp.down_proj.<name>").
// dequantize(q) is the reference: W[k, n] = (code - zero[group(k)]) * scale[group(k)], in double.
//
// Example (GPTQ v1, 4-bit, group 32, symmetric, act-order):
//   auto w = random_weights(K, N, /*seed=*/1);
//   IntQuant q = quantize_gptq(w, K, N, {.bits = 4, .group_size = 32, .symmetric = true,
//                                       .act_order_seed = 7});
//   CheckpointTensors t = encode_gptq(q, GptqFormat::V1);  // t.at("qweight"), t.at("qzeros"), ...
//   std::vector<double> ref = dequantize(q);              // [K, N]
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/linear.h"

namespace qlm::testing {

// One integer-quantized matrix, format independent. Row k of the [K, N] weight is input feature k.
struct IntQuant {
  int bits = 4;
  int64_t K = 0, N = 0;
  int64_t group_size = 0;       // rows per group; K for one group (channelwise / group_size -1)
  int64_t num_groups = 0;       // K / group_size
  bool symmetric = true;        // zeros == 2^(bits-1) everywhere
  bool act_order = false;       // g_idx is a permutation of grouped rows (else g_idx[k] == k / group_size)
  std::vector<uint8_t> codes;   // [K, N] unsigned codes in [0, 2^bits)
  std::vector<int32_t> zeros;   // [num_groups, N] true zero points in [0, 2^bits)
  std::vector<float> scales;    // [num_groups, N], exactly representable in scale_dtype
  std::vector<int32_t> g_idx;   // [K] group of each row
  DType scale_dtype = DType::F16;
  int32_t code(int64_t k, int64_t n) const { return codes[k * N + n]; }
};

struct QuantOptions {
  int bits = 4;
  int64_t group_size = 128;        // -1: one group spanning K
  bool symmetric = true;
  // Act-order: rows are grouped in a random permutation drawn from this seed (AutoGPTQ desc_act);
  // g_idx[k] = position of k in the permutation / group_size.
  std::optional<uint64_t> act_order_seed;
  DType scale_dtype = DType::F16;  // F16, BF16 or F32
  // Smallest zero point the GPTQ asymmetric quantizer may choose. A GPTQ v1 checkpoint stores
  // zero - 1 and cannot hold a true zero of 0 (AutoGPTQ wraps it); use 1 to write valid v1 files.
  int min_zero = 0;
};

// Deterministic N(0, 1)-ish weights [K, N] (row-major), and inputs in [-1, 1).
std::vector<float> random_weights(int64_t K, int64_t N, uint64_t seed);
std::vector<float> random_inputs(int64_t M, int64_t K, uint64_t seed);

// Quantizers of each tool (FORMATS.md §3): each uses the tool's scale/zero formula.
// GPTQ (AutoGPTQ quantizer.py): sym s = 2*absmax/maxq, z = 2^(b-1); asym s = (max-min)/maxq,
// z = round(-min/s). Bits 2, 3, 4, 8.
IntQuant quantize_gptq(const std::vector<float>& w, int64_t K, int64_t N, const QuantOptions& opt);
// AutoAWQ pseudo_quantize_tensor (zero_point=True): s = max(max-min, 1e-5)/15, z = clamp(-round(min/s)).
// 4-bit asymmetric only; no act-order.
IntQuant quantize_awq(const std::vector<float>& w, int64_t K, int64_t N, int64_t group_size,
                      DType scale_dtype = DType::F16);
// compressed-tensors: sym s = absmax / ((qmax-qmin)/2), stored u = q + 2^(b-1); asym
// s = (max-min)/(qmax-qmin), z = round(qmin - min/s). Bits 4, 8. group_size -1 = channel strategy.
IntQuant quantize_ct(const std::vector<float>& w, int64_t K, int64_t N, const QuantOptions& opt);

// Exact reference weight [K, N] (double).
std::vector<double> dequantize(const IntQuant& q);

using CheckpointTensors = std::map<std::string, Tensor>;

enum class GptqFormat { V1, V2 };  // v1 stores zero - 1 (checkpoint_format "gptq"), v2 the true zero
// "qweight" I32 [K*b/32, N], "qzeros" I32 [G, N*b/32], "scales" [G, N] (scale_dtype), "g_idx" I32 [K].
// Requires K*b and N*b multiples of 32. V1 with a true zero of 0 cannot be written (throws).
CheckpointTensors encode_gptq(const IntQuant& q, GptqFormat format);
// "qweight" I32 [K, N/8] and "qzeros" I32 [G, N/8] interleaved, "scales" [G, N]. 4-bit only.
CheckpointTensors encode_awq(const IntQuant& q);
// "weight_packed" I32 [N, ceil(K/P)], "weight_scale" [N, G], "weight_zero_point" I32 [ceil(N/P), G]
// (asymmetric only), "weight_g_idx" I32 [K] (when with_g_idx), "weight_shape" [2] = (N, K) in
// shape_dtype (I64 or I32).
CheckpointTensors encode_ct(const IntQuant& q, bool with_g_idx, DType shape_dtype = DType::I64);

// x [M, K] · W [K, N] in double: the reference output of a layer with dequantized weights.
std::vector<double> matmul_ref(const std::vector<float>& x, int64_t M, const std::vector<double>& w, int64_t K,
                               int64_t N);

// ---- layer harness: a LinearLayer of any format, loaded from per-part checkpoint tensors ----

// Builds a config through the registry from a quantization_config JSON object text.
std::unique_ptr<QuantizationConfig> make_quant_config(const std::string& json_text);

struct LayerFixture {
  const QuantizationConfig* config = nullptr;  // null: unquantized
  LinearSpec spec;                             // shard_prefixes set for fused kinds
  std::string backend = "auto";                // --linear-backend ("cpu_ref", "cpu_fast", ...)
};
// Checkpoint tensors of each logical part in the layer's order (q, k, v / gate, up / one part);
// a tensor named "bias" loads the layer bias. Names not declared by the method are an error.
using PartTensors = std::vector<CheckpointTensors>;

// Builds the layer for `tp`, loads every tensor of every part (skipping names in `skip`), calls
// `before_finalize` (e.g. to keep the standard form) and finalizes.
std::unique_ptr<LinearLayer> build_layer(const LayerFixture& f, const PartTensors& parts, TpContext tp,
                                         const std::vector<std::string>& skip = {},
                                         const std::function<void(LinearLayer&)>& before_finalize = {});
// Runs the layer at tensor-parallel size `tp` (one thread per rank) on x [M, K] and returns the full
// output [M, N] in global column order (rank slices of every part put back in place).
std::vector<float> run_layer_tp(const LayerFixture& f, const PartTensors& parts, const std::vector<float>& x,
                                int64_t M, int tp, const std::vector<std::string>& skip = {});

// ||a - b|| / ||b|| over all elements.
double normwise_rel_error(const std::vector<float>& a, const std::vector<double>& b);

}  // namespace qlm::testing
