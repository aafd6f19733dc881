// Plain launchers of the runtime's CUDA kernels (the model's non-linear ops). C++17, no qlm
// headers, so the .cu files can include it; the Tensor-level wrappers are in device_ops.h.
// Every launcher enqueues on `stream` and returns the launch status (cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qlm::ops::cu {

// Element type of activations, embedding tables and KV-cache storage. The fp8 types (e4m3fn and
// e5m2, saturating, encoded bit-exactly as core/float_convert.h) are KV-cache storage only: the
// launchers that take them say so (kv_write, attention's kv_type).
enum class ElemType : int { F32 = 0, F16 = 1, BF16 = 2, F8E4M3 = 3, F8E5M2 = 4 };

// out[t, :] = table[ids[t], :] converted to out_type; ids must be in range (checked on the host).
cudaError_t launch_embedding(const void* table, ElemType table_type, const int32_t* ids, int64_t rows,
                             int64_t hidden, void* out, ElemType out_type, cudaStream_t stream);

// y[r, :] = weight ⊙ x[r, :] / sqrt(mean(x[r, :]²) + eps) with the mean of squares in double, as
// ops::rms_norm, for rows·groups vectors of `dim` elements. Vector (r, g) is x[r·x_stride + g·dim]
// (groups > 1: the per-head q/k norm over heads of one row) and likewise in y. x is F32; y may be
// any ElemType and may alias x when y_type is F32. next_first: the kernel lets the next kernel launch before it
// waits for the previous one (pdl_enter_next_first, kernels/cuda/pdl.cuh) instead of after; same results.
cudaError_t launch_rms_norm(const float* x, int64_t x_stride, const float* weight, void* y, ElemType y_type,
                            int64_t y_stride, int64_t rows, int64_t groups, int64_t dim, float eps, cudaStream_t stream,
                            bool next_first = false);

// Which form the RMSNorm kernels take where either would do (tests compare them; the same bits): 1 the form that holds
// a vector in registers (up to 16 elements a thread, weights loaded before the wait for the previous kernel), 0 the
// general loop, -1 (the default) the register form unless QLM_NORM_ONE=0.
void set_rms_norm_registers(int on);

// The residual add fused into the next RMSNorm: x[r, :] += add[r, :] (add in add_type, the same
// [rows, dim] layout), then y[r, :] = RMSNorm(x[r, :]) · weight as launch_rms_norm; x F32, rows
// dim apart.
cudaError_t launch_add_rms_norm(float* x, const void* add, ElemType add_type, const float* weight, void* y,
                                ElemType y_type, int64_t rows, int64_t dim, float eps, cudaStream_t stream,
                                bool next_first = false);

// x[i] += y[i] for n elements (the F32 residual stream plus a linear output in act dtype).
cudaError_t launch_add_residual(float* x, const void* y, ElemType y_type, int64_t n, cudaStream_t stream);

// out[i] = float(x[i]).
cudaError_t launch_to_f32(const void* x, ElemType x_type, float* out, int64_t n, cudaStream_t stream);

// out[r, i] = silu(g[r, i]) · u[r, i] where row r of gate_up is [g | u], each `width` wide; both
// tensors in `type`, math in F32.
cudaError_t launch_silu_and_mul(const void* gate_up, void* out, ElemType type, int64_t rows, int64_t width,
                                cudaStream_t stream);

// The end of a CUDA-graph decode step (decode_advance.cu): step[0] = the greedy token of logits [vocab] (the first
// index of the largest value, NaN never chosen, 0 when all are NaN: runtime::argmax), step[1] += 1, and angles
// [2·half] = row step[1] of table [table_rows, 2·half] (the next position's cos then sin; left as they are past the
// table). scratch: kDecodeAdvanceScratch int32 on the device, zero before the first launch; each launch leaves it so.
inline constexpr int kDecodeAdvanceBlocks = 64;
inline constexpr int kDecodeAdvanceScratch = 2 + 2 * kDecodeAdvanceBlocks;
cudaError_t launch_decode_advance(const float* logits, int64_t vocab, int32_t* step, float* angles, const float* table,
                                  int64_t table_rows, int64_t half, int32_t* scratch, cudaStream_t stream);

// Rotates x[t, h, 0:2·half] in place (rotate_half pairing i ↔ i + half, as ops::apply_rope) with
// cos/sin [tokens, half]; rows are row_stride floats apart, heads head_dim apart.
cudaError_t launch_rotary(float* x, int64_t row_stride, int64_t tokens, int64_t heads, int64_t head_dim,
                          const float* cos, const float* sin, int64_t half, cudaStream_t stream);

// Writes `tokens` rows of K and V (row_elems = kv_heads·head_dim floats each, rows `stride` floats
// apart) into slots slot0.. of one layer's cache (storage `cache_type`, any ElemType), stored =
// x / scale (IEEE division) rounded to nearest even; k_scales / v_scales: device F32 [kv_heads].
// With slot0_dev set, the first slot is read from device memory there instead (a CUDA graph's
// decode step, replayed at every position).
cudaError_t launch_kv_write(const float* k, const float* v, int64_t stride, int64_t tokens, int64_t row_elems,
                            int64_t head_dim, void* k_cache, void* v_cache, ElemType cache_type, int64_t slot0,
                            const int32_t* slot0_dev, const float* k_scales, const float* v_scales,
                            cudaStream_t stream);

// The step from a layer's qkv projection to its attention (qkv_prepare.cu): qkv [tokens, (heads +
// 2·kv_heads)·head_dim] in qkv_type; each q and k head vector gets the per-head RMSNorm where q_norm /
// k_norm (F32 [head_dim]) are set, then rotary with cos / sin [tokens, half] (pairs i, i + half; elements
// from 2·half on unrotated); q goes to q_out (F32 [tokens, heads·head_dim]), k and v into slots slot0.. of
// the cache storage k_cache / v_cache (cache_type, rows of kv_heads·head_dim) as launch_kv_write does.
struct QkvPrepareArgs {
  const void* qkv = nullptr;
  ElemType qkv_type = ElemType::F32;  // F32, F16 or BF16
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0;
  const float* q_norm = nullptr;  // null: no per-head norm of q
  const float* k_norm = nullptr;
  float eps = 0.0f;
  float* q_out = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  ElemType cache_type = ElemType::F32;  // any ElemType, fp8 included
  int64_t slot0 = 0;
  const int32_t* slot0_dev = nullptr;  // set: the first slot is read from device memory there
  const float* k_scales = nullptr;     // device F32 [kv_heads]
  const float* v_scales = nullptr;
};
cudaError_t launch_qkv_prepare(const QkvPrepareArgs& args, cudaStream_t stream);

struct AttentionArgs {
  const float* q = nullptr;  // query t, head h at q[t·q_stride + h·head_dim]
  int64_t q_stride = 0;
  int64_t tokens = 0, past = 0;         // query t sits at slot past + t
  const int32_t* past_dev = nullptr;    // set: `past` is read from device memory there instead
  const void* k = nullptr;              // [slots, kv_heads, head_dim] in kv_type
  const void* v = nullptr;
  ElemType kv_type = ElemType::F32;             // any ElemType, fp8 included
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // head_dim ≤ kMaxAttentionHeadDim
  float scale = 1.0f;
  const float* k_scales = nullptr;  // device F32 [kv_heads]: read = stored · scale of the head
  const float* v_scales = nullptr;
  int64_t sliding_window = 0;  // 0: full causal
  void* out = nullptr;         // query t, head h at out[t·out_stride + h·head_dim], in out_type
  ElemType out_type = ElemType::F32;
  int64_t out_stride = 0;
  // One query token over many slots (attention_chunks): `chunks` blocks per head of split_slots
  // slots each write their partial softmax state to `partial` (F32 [heads, chunks, 2 + head_dim]),
  // and a second kernel combines them. 0: one block per (token, head).
  int64_t split_slots = 0, chunks = 0;
  float* partial = nullptr;
  // Every slot read is below this bound (the cache capacity); 0: unknown. A single decode token without
  // chunks runs the per-group decode form only where the bound (or, without it, past + 1 with past on
  // the host) fits one chunk.
  int64_t slots_bound = 0;
  // Multiprocessors of the device (0: unknown): the decode kernel runs two blocks per multiprocessor where its
  // blocks outnumber them twice.
  int sm_count = 0;
};
inline constexpr int64_t kMaxAttentionHeadDim = 256;
inline constexpr int64_t kAttentionChunkSlots = 256;

// Chunks of kAttentionChunkSlots for `tokens` queries over at most slots_bound slots (the cache
// capacity): more than one only for a single token past one chunk; 0 = no split.
int64_t attention_chunks(int64_t tokens, int64_t slots_bound);

// The kernels launch_attention runs for `a` (host-only, so the rule is testable without a GPU):
//   PerHead         one block per (query token, head) over every visible slot (prefill; decode where the decode
//                   kernel does not apply and the cache fits one chunk);
//   PerHeadChunked  the same per (head, chunk), then the combine (decode past one chunk without the decode kernel);
//   Decode          one block per (kv head, chunk) serving the group's query heads (+ the combine past one chunk);
//   DecodePaired    the same, two blocks per multiprocessor, where blocks > 2 x a.sm_count;
//   DecodeLanes     one block per (kv head, chunk) as Decode, each slot's row spread over a team of lanes and the
//                   slots over every warp (decode_lanes_attention.cu): where attention_lanes_by_rule, caches of
//                   up to kAttentionLanesMaxChunks chunks (within one chunk the decode form leaves most of its
//                   warps waiting on one warp's scores); elsewhere when set_attention_lanes / QLM_ATTENTION_LANES
//                   asks for it.
enum class AttentionForm : int { PerHead = 0, PerHeadChunked = 1, Decode = 2, DecodePaired = 3, DecodeLanes = 4 };
AttentionForm attention_form(const AttentionArgs& a);
const char* attention_form_name(AttentionForm form);
// The largest cache, in chunks, where the rule runs the lanes form (1: within one chunk only; 0: never).
// Session 45 (H100): within one chunk, one block per (kv head, group part), decode 8B +1.9 %, 70B:8 +5.2 %,
// Qwen3-30B-A3B:8 +11.3 % at a 16-token prompt, though alone it lost to the decode form past ~100 visible slots on
// groups of 4 (12.1 against 9.8 µs at 128 slots, 20.0 / 12.1 at 255); with the clusters of decode_lanes_parts 5.1 /
// 6.8 / 8.3 / 9.2 µs at 16 / 48 / 128 / 255 slots on Llama-3-8B heads against 7.8 / 8.2 / 9.8 / 12.1 (70B heads:
// against 13.9 / 14.4 / 16.6 / 19.6), decode +3.0 % (8B, 16-token prompt), +3.8 % (8B, 128), +7.9 % (70B:8, 128),
// +12.9 % (Qwen3-30B-A3B:8, 128). Past one chunk (clusters of 4): 8B heads 12.0 / 15.3 / 32.5 / 95.0 µs at 511 / 1024 /
// 4096 / 16384 slots against 14.7 / 15.6 / 19.0 / 49.4, 70B heads 15.8 / 20.9 / 46.9 / 142.7 against 22.6 / 23.5 /
// 30.5 / 73.8: it wins up to 5 chunks and loses from 17 (docs/perf-data/attention_lanes_h100_s45.jsonl,
// attention_parts_h100_s45.jsonl, decode_lanes_h100_s45.jsonl, decode_parts_h100_s45.jsonl).
inline constexpr int64_t kAttentionLanesMaxChunks = 4;
// Whether the rule runs the lanes form over a cache of `chunks` chunks (attention_chunks; 0: within one chunk).
constexpr bool attention_lanes_by_rule(int64_t chunks) { return (chunks > 0 ? chunks : 1) <= kAttentionLanesMaxChunks; }
// Process-wide override of the lanes form (1: wherever its shape fits, chunked caches included; 0: never; -1:
// QLM_ATTENTION_LANES, else the rule above). For tests and measurements; attention_form reads it on every call.
void set_attention_lanes(int mode);
// The lanes form's blocks (one thread-block cluster, sm_90) that share a chunk's visible slots, each taking a run of
// whole block steps (8 warps x the slots of a warp) and the cluster combining their softmax states: enough that no
// block streams more than one batch of steps (4: each lane's loads of a batch in flight together, one round trip to
// memory for K and one for V), at most kLanesMaxParts. From the slots a block may see — the chunk past one chunk,
// else the cache's capacity — so the choice is made when a decode step is captured. QLM_ATTENTION_LANES_PARTS=n
// forces n (1: no clusters). Without cluster launches (before sm_90) the launcher runs one block.
inline constexpr int kLanesMaxParts = 8;
int decode_lanes_parts(const AttentionArgs& a, int64_t chunks);

// Causal GQA attention, F32 math with an online softmax; one block per (query token, head) for prefill,
// one block per (kv head, chunk) serving the kv head's query heads for a single decode token
// (attention.cu), chunked as above. QLM_ATTENTION_DECODE=0 runs decode in the per-(token, head) form.
cudaError_t launch_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace qlm::ops::cu
