// The decoder's non-linear ops on CUDA tensors, as Tensor-level calls over the launchers of
// launch.h. Everything runs on the device's qlm stream (cuda/context.h), so results are ordered
// with the linear kernels without synchronising. The residual stream is F32; activations handed
// to linear layers are in the model's act dtype (F32, F16 or BF16). Declared in every build,
// defined only with QLM_WITH_CUDA (the device forward is unreachable without it).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cuda/device_kv_cache.h"
#include "runtime/ops/rope.h"

namespace qlm::ops::cu {

// [T, hidden] rows of `table` ([vocab, hidden], F32/F16/BF16 on the device) for token ids that the
// caller checked against the vocabulary, converted to `out`.
Tensor embedding(const Tensor& table, std::span<const int32_t> ids, DType out);
// The same for `rows` ids already on the device (in range: the caller checked them when it wrote them).
Tensor embedding(const Tensor& table, const int32_t* device_ids, int64_t rows, DType out);

// y = RMSNorm(x[row0 : row0 + rows]) · weight: x F32 [T, dim], weight F32 [dim], y [rows, dim] in `out`.
// next_first: the kernel lets the next one launch before it waits for the previous one (launch.h); same y.
Tensor rms_norm(const Tensor& x, int64_t row0, int64_t rows, const Tensor& weight, float eps, DType out,
                bool next_first = false);
// The same after x[row0 : row0 + rows] += add[row0 : row0 + rows] (add [T, dim] in any act dtype;
// undefined: no add), one kernel: the residual add of a layer's output fused into the next norm.
Tensor add_rms_norm(Tensor& x, const Tensor& add, int64_t row0, int64_t rows, const Tensor& weight, float eps,
                    DType out, bool next_first = false);
// The per-head norm of Qwen3, in place: `heads` vectors of head_dim starting at column col0 of
// every row of the F32 tensor x; weight F32 [head_dim].
void head_rms_norm(Tensor& x, int64_t col0, int64_t heads, int64_t head_dim, const Tensor& weight, float eps);

// x += y: x F32, y the same shape in any act dtype.
void add_residual(Tensor& x, const Tensor& y);
// F32 copy of x (x itself when it is F32 already).
Tensor to_f32(const Tensor& x);
// [rows, width] = silu(gate) · up of gate_up [rows, 2·width], in gate_up's dtype.
Tensor silu_and_mul(const Tensor& gate_up);

// Host-computed rotary angles, uploaded once per forward.
struct DeviceRope {
  int64_t half = 0, tokens = 0;
  Tensor cos, sin;  // F32 [tokens, half] on the device
};
DeviceRope upload_rope(const RopeAngles& angles, int64_t tokens, Device device);
// The inputs of a CUDA-graph decode step, in one F32 device tensor so one copy writes them: elements 0 and 1 hold
// the token id and its slot as int32 bits, then the slot's rotary cos [half] and sin [half] (`rope` views them).
struct DecodeStepInputs {
  Tensor buffer;  // F32 [2 + 2·half] on the device
  DeviceRope rope;
  Tensor scratch;  // I32 [kDecodeAdvanceScratch] for decode_advance's blocks (zero between launches)
  int32_t* step() { return reinterpret_cast<int32_t*>(buffer.data<float>()); }  // [token, slot]
};
DecodeStepInputs make_decode_step_inputs(const RopeParams& rope, Device device);
// Writes token, its slot `position` and that position's angles (rope_angles of it alone) into the inputs from the host.
void write_decode_step_inputs(DecodeStepInputs& in, int32_t token, int64_t position, const RopeParams& rope);
// The step's last kernel (launch_decode_advance): the greedy token of logits F32 [1, vocab] into step()[0], the slot
// + 1, and that slot's angles from table F32 [rows, 2·half] (the rope_table of the positions 0 .. rows - 1).
void decode_advance(const Tensor& logits, DecodeStepInputs& in, const Tensor& table);
// F32 [positions, 2·half] on the device: row p holds position p's cos then sin (ops::rope_angles).
Tensor rope_table(const RopeParams& params, int64_t positions, Device device);

// Rotates `heads` heads of head_dim starting at column col0 of every row of the F32 tensor x.
void apply_rope(const DeviceRope& rope, Tensor& x, int64_t col0, int64_t heads, int64_t head_dim);

// The attention inputs of layer `layer` in one kernel (launch_qkv_prepare): the q heads and k heads of
// qkv ([T, (heads + 2·kv_heads)·head_dim] in the act dtype) get the per-head RMSNorm where q_norm /
// k_norm (F32 [head_dim]) are defined (Qwen3), then rotary; returns q as F32 [T, heads·head_dim] and
// writes k and v into `layer` of the cache at slots [slot0, slot0 + T) (slot0_dev: read on the device,
// as DeviceKvCache::write). The values of to_f32, head_rms_norm, apply_rope and DeviceKvCache::write.
Tensor prepare_attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, int64_t head_dim, const DeviceRope& rope,
                         const Tensor& q_norm, const Tensor& k_norm, float eps, DeviceKvCache& cache, int64_t layer,
                         int64_t slot0, const int32_t* slot0_dev = nullptr);

// Attention of the queries in columns [0, heads·head_dim) of the F32 tensor qkv (rows at slots
// past, past + 1, ...) over `layer` of the cache, which already holds those slots. Returns
// [T, heads·head_dim] in `out`. With past_dev set the kernel reads `past` from that device int
// (a CUDA graph's decode step); the host value still bounds-checks.
Tensor attention(const Tensor& qkv, int64_t past, const DeviceKvCache& cache, int64_t layer,
                 const AttentionParams& params, DType out, const int32_t* past_dev = nullptr);
// The kernels attention() runs for `tokens` queries after `past` slots of `cache` (launch.h's AttentionForm by
// name: "per-head", "per-head chunked", "decode", "decode paired"), for benchmarks and tests.
std::string attention_form(int64_t tokens, int64_t past, const DeviceKvCache& cache, const AttentionParams& params);
// Where that form is the lanes form, its blocks per chunk (decode_lanes_parts, launch.h: the rule; the launcher runs
// 1 on GPUs without thread-block clusters); else 0.
int attention_lanes_parts(int64_t tokens, int64_t past, const DeviceKvCache& cache, const AttentionParams& params);

}  // namespace qlm::ops::cu
