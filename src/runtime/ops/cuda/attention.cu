// Causal GQA attention over the device KV cache. All math in F32; K and V are read in their storage
// type (fp8 included) and scaled by their kv head's scale.
//
// Prefill (and decode where the fast form below does not apply): one block per (query token, head)
// walks every visible slot; its warps take a strided share of the slots keeping an online softmax
// (running max m, sum l and the weighted V accumulator, lane i holding features i, i + 32, ...), then
// the warps' states are merged. Right for prefill, where tokens x heads blocks fill the GPU.
//
// Decode (one query token): one block per (kv head, chunk of kAttentionChunkSlots slots) serves every
// query head of the kv head's group, so each K and V row is read once per group, not once per head,
// and its loads come in two rounds before any math (the slot count, queries and scale; then each thread's
// K row and V vectors, 16 in flight): (1) each thread takes one slot of the chunk and
// scores it against all the group's queries (its K row in 16- or 8-byte vectors), (2) one warp per
// head takes the chunk's max and exp sums, (3) the threads split the V rows into vectors and the
// chunk's slots into groups, each summing p x v over its slots, and the groups' sums are added in a
// fixed order (the same result on every run). With the cache capacity past one chunk, each block
// writes its partial state (m, l, unnormalised accumulator) and a second kernel combines the chunks
// (flash-decoding); within one chunk the block writes the output itself. The chunk count comes from
// the host's bound on the slots (the cache capacity), so a CUDA graph captured at one capacity stays
// valid at every position; blocks of chunks without a visible slot (past the last slot, before a sliding
// window) return at once, and the combine reads only the chunks that hold visible slots. Groups of more than
// kDecodeMaxGroup heads, and head sizes that are not whole vectors, take the per-(token, head) form
// (chunked the same way when the capacity passes one chunk). The lanes form (decode_lanes_attention.cu) takes
// caches of up to kAttentionLanesMaxChunks chunks, where a block's visible slots are few and this form's scores
// run in one warp while the others wait (launch.h: attention_lanes_by_rule, QLM_ATTENTION_LANES).
#include <math.h>

#include "core/env_switch.h"
#include "core/mode_switch.h"
#include "runtime/ops/cuda/attention_kv.cuh"

namespace qlm::ops::cu {
namespace {

constexpr int kWarps = 8;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

// The online-softmax state of one block over slots [lo, hi] (inclusive; empty when lo > hi),
// merged over its warps: m, l and acc[i] for i < head_dim (rescaled to m). l = 0: no slot.
struct BlockState {
  float m, l;
  float* acc;  // shared memory, head_dim values
};

template <ElemType KV>
__device__ BlockState attend_slots(const AttentionArgs& a, const float* q, int64_t kv_head, int64_t lo, int64_t hi,
                                   float (&warp_acc)[kWarps][kMaxAttentionHeadDim], float* merged) {
  const int64_t d = a.head_dim, row = a.kv_heads * a.head_dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) acc[r] = 0.0f;
  const float score_scale = a.k_scales[kv_head] * a.scale;
  for (int64_t j = lo + warp; j <= hi; j += kWarps) {
    const int64_t base = j * row + kv_head * d;
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) dot += q[i] * load_elem<KV>(a.k, base + i);
    }
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    const float s = dot * score_scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first slot (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) acc[r] = acc[r] * correction + p * load_elem<KV>(a.v, base + i);
    }
    m = m_new;
  }

  __shared__ float warp_m[kWarps], warp_l[kWarps];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t i = lane + 32 * r;
    if (i < d) warp_acc[warp][i] = acc[r];
  }
  __syncthreads();
  // Warps that saw no slot (l = 0) contribute nothing.
  BlockState st{-INFINITY, 0.0f, merged};
  for (int w = 0; w < kWarps; ++w)
    if (warp_l[w] > 0.0f) st.m = fmaxf(st.m, warp_m[w]);
  float weight[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = warp_l[w] > 0.0f ? expf(warp_m[w] - st.m) : 0.0f;
    st.l += warp_l[w] * weight[w];
  }
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (weight[w] > 0.0f) o += warp_acc[w][i] * weight[w];
    merged[i] = o;
  }
  __syncthreads();
  return st;
}

// The query of (token t, head h) into shared memory; the visible slots [first, last] of token t.
__device__ void load_query(const AttentionArgs& a, int64_t t, int64_t h, float* q, int64_t* first, int64_t* last) {
  visible_slots(a, past_of(a), t, first, last);
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x) q[i] = a.q[t * a.q_stride + h * a.head_dim + i];
  __syncthreads();
}

template <ElemType KV, ElemType OUT>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  pdl_enter();
  const int64_t t = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  __shared__ float q[kMaxAttentionHeadDim], merged[kMaxAttentionHeadDim];
  __shared__ float warp_acc[kWarps][kMaxAttentionHeadDim];
  int64_t first, last;
  load_query(a, t, h, q, &first, &last);
  // At least one slot (the query's own) is visible, so st.l > 0.
  const BlockState st = attend_slots<KV>(a, q, kv_head, first, last, warp_acc, merged);
  const float norm = a.v_scales[kv_head] / st.l;
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x)
    store_elem<OUT>(a.out, t * a.out_stride + h * a.head_dim + i, merged[i] * norm);
}

// Partial state of chunk c of head h, one query token: [m, l, acc[head_dim]] at
// partial[(h · chunks + c) · (2 + head_dim)].
template <ElemType KV>
__global__ void __launch_bounds__(kWarps * 32) attention_chunk_kernel(AttentionArgs a, int64_t chunks) {
  pdl_enter();
  const int64_t h = blockIdx.x % a.heads, c = blockIdx.x / a.heads;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  __shared__ float q[kMaxAttentionHeadDim], merged[kMaxAttentionHeadDim];
  __shared__ float warp_acc[kWarps][kMaxAttentionHeadDim];
  int64_t first, last;
  load_query(a, 0, h, q, &first, &last);
  const int64_t lo = first > c * a.split_slots ? first : c * a.split_slots;
  const int64_t hi = last < (c + 1) * a.split_slots - 1 ? last : (c + 1) * a.split_slots - 1;
  if (lo > hi) return;  // no visible slot: the combine reads only chunks that hold one
  const BlockState st = attend_slots<KV>(a, q, kv_head, lo, hi, warp_acc, merged);
  float* out = a.partial + (h * chunks + c) * (2 + a.head_dim);
  if (threadIdx.x == 0) {
    out[0] = st.m;
    out[1] = st.l;
  }
  for (int64_t i = threadIdx.x; i < a.head_dim; i += blockDim.x) out[2 + i] = st.l > 0.0f ? merged[i] : 0.0f;
}

// Combines the chunks of each head (one block per head): the softmax over every visible slot. The
// chunks' weights exp(m_c - m) are taken once into shared memory (a thread per chunk), then a thread per
// feature sums the chunks' accumulators with every load independent of the others (no chain of L2 round
// trips); the sums run in chunk order and the block reductions in a fixed tree, so every run gives the
// same result.
constexpr int kCombineThreads = 256;
constexpr int64_t kCombineMaxChunks = 8192;  // dynamic shared memory: a float per chunk (32 KB)

template <ElemType OUT>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(AttentionArgs a, int64_t chunks) {
  pdl_enter();
  const int64_t h = blockIdx.x;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  const int64_t width = 2 + a.head_dim;
  const float* part = a.partial + h * chunks * width;
  extern __shared__ float weight[];  // [chunks]: exp(m_c - m); 0 for chunks without a visible slot
  __shared__ float warp_red[kCombineThreads / 32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // Block-wide reduction in a fixed tree (op: max or sum).
  const auto block_reduce = [&](float v, auto op) {
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    __syncthreads();  // warp_red is reused
    if (lane == 0) warp_red[warp] = v;
    __syncthreads();
    float r = warp_red[0];
    for (int w = 1; w < kCombineThreads / 32; ++w) r = op(r, warp_red[w]);
    return r;
  };
  // Chunks [c_lo, c_hi] hold the visible slots; the chunk kernels wrote no state for the others.
  int64_t first, last;
  visible_slots(a, past_of(a), 0, &first, &last);
  const int64_t c_lo = first / a.split_slots, c_hi = last / a.split_slots < chunks ? last / a.split_slots : chunks - 1;
  float m = -INFINITY;
  for (int64_t c = c_lo + tid; c <= c_hi; c += kCombineThreads)
    if (part[c * width + 1] > 0.0f) m = fmaxf(m, part[c * width]);
  m = block_reduce(m, [](float x, float y) { return fmaxf(x, y); });
  float l = 0.0f;
  for (int64_t c = c_lo + tid; c <= c_hi; c += kCombineThreads) {
    const float lc = part[c * width + 1];
    const float w = lc > 0.0f ? expf(part[c * width] - m) : 0.0f;
    weight[c] = w;
    l += lc * w;
  }
  l = block_reduce(l, [](float x, float y) { return x + y; });  // also orders the weight writes
  const float norm = a.v_scales[kv_head] / l;  // l > 0: the query's own slot is visible
  for (int64_t i = tid; i < a.head_dim; i += kCombineThreads) {
    float o = 0.0f;
#pragma unroll 8
    for (int64_t c = c_lo; c <= c_hi; ++c) o += part[c * width + 2 + i] * weight[c];
    store_elem<OUT>(a.out, h * a.head_dim + i, o * norm);
  }
}

// ---- Decode: one block per (kv head, chunk) for every query head of the group ----

constexpr int kDecodeThreads = static_cast<int>(kAttentionChunkSlots);  // phase 1: a thread per slot
constexpr int kDecodeMaxGroup = kDecodeThreads / 32;                    // phase 2: a warp per query head
static_assert(kDecodeThreads % 32 == 0 && kDecodeMaxGroup >= 1);
// The kernel is compiled for groups of up to 4 heads (Llama-3-8B, Qwen) and up to kDecodeMaxGroup (70B: 8): the
// accumulators of phase 3 are G_MAX x E registers per thread. Both have a paired form: two blocks per
// multiprocessor (at most 128 registers), V requested after the scores instead of with K (both batches do not fit
// in registers; groups of 8 keep half a batch of V in flight), so one block's loads overlap the other's math. It
// pays only where blocks outnumber the multiprocessors twice (H200, Llama-3-8B heads, µs per call: 256 blocks
// 31.1 vs 37.8, 520 blocks 57.9 vs 74.3; but 136 blocks 27.1 vs 22.7: one block per multiprocessor with both
// loads in flight is faster). attention_form (launch.h) holds the rule.
constexpr int kDecodeSmallGroup = 4;
static_assert(kDecodeSmallGroup <= kDecodeMaxGroup);

// Vectors (phase 1) or slots (phase 3) whose loads a thread has in flight at once: a whole BF16 / F16 row
// of head_dim 128 and all of a thread's V slots in one round (16 slot groups of 256 slots).
constexpr int kLoadBatch = 16;

// Block (kv head kvh, chunk c) over slots [c·C, (c+1)·C) ∩ visible; query heads kvh·G .. kvh·G + G - 1.
// chunks == 0: the block is the only chunk and writes the output; else its partial state.
template <ElemType KV, ElemType OUT, int G_MAX, bool kPaired>
__global__ void __launch_bounds__(kDecodeThreads, kPaired ? 2 : 1)
    decode_attention_kernel(AttentionArgs a, int64_t chunks) {
  pdl_enter();
  static_assert(G_MAX >= 1 && G_MAX <= kDecodeMaxGroup);
  constexpr int E = KvVec<KV>::E, C = kDecodeThreads;
  constexpr int kWarpsPerBlock = kDecodeThreads / 32;
  const int64_t kvh = blockIdx.x % a.kv_heads, c = blockIdx.x / a.kv_heads;
  const int G = static_cast<int>(a.heads / a.kv_heads);
  const int d = static_cast<int>(a.head_dim), RC = d / E;  // vectors per head row
  const int64_t row = a.kv_heads * a.head_dim;
  const int tid = threadIdx.x, warp = tid / 32;
  __shared__ __align__(16) float qs[G_MAX * kMaxAttentionHeadDim];  // the group's queries, head after head
  __shared__ float ps[G_MAX][C];                                    // scores, then exp(score - m)
  __shared__ __align__(16) float part[C * E];                       // phase 3: every thread's E sums of one head
  __shared__ float head_m[G_MAX], head_l[G_MAX];

  using T = typename KvVec<KV>::T;
  using Raw = typename KvVec<KV>::Raw;
  const int SG = kDecodeThreads / RC, rc = tid % RC, sg = tid / RC;  // phase 3: vector rc, slot group sg

  // Two rounds of loads before any math. Round 1: the slot count (a device int in a graph's step), the
  // group's queries and the k scale, all in flight together.
  const int64_t past = past_of(a);
  constexpr int kQPerThread = G_MAX * static_cast<int>(kMaxAttentionHeadDim) / kDecodeThreads;
  const float* q = a.q + kvh * G * a.head_dim;  // token 0: heads kvh·G.. are adjacent
  float qv[kQPerThread];
#pragma unroll
  for (int r = 0; r < kQPerThread; ++r) qv[r] = tid + r * kDecodeThreads < G * d ? q[tid + r * kDecodeThreads] : 0.0f;
  const float score_scale = a.k_scales[kvh] * a.scale;
  int64_t first, last;
  visible_slots(a, past, 0, &first, &last);
  const int64_t c0 = c * C;
  const int64_t lo = first > c0 ? first : c0, hi = last < c0 + C - 1 ? last : c0 + C - 1;
  if (lo > hi) return;  // no visible slot (never with chunks == 0): the combine reads only chunks that hold one
  // Round 2: the first batch of this thread's K vectors (its slot's row, phase 1) and V vectors (its slot
  // group's slots, phase 3).
  const int64_t j = c0 + tid;
  const bool scored = j >= lo && j <= hi;
  const T* krow = static_cast<const T*>(a.k) + j * row + kvh * a.head_dim;
  const T* vcol = static_cast<const T*>(a.v) + kvh * a.head_dim + rc * E;
  const int64_t jv0 = lo + sg;  // this thread's first V slot
  // The paired form of 8-head groups keeps half a batch of V in flight (its 64 accumulators leave no room).
  constexpr int kVBatch = kPaired && G_MAX > kDecodeSmallGroup ? kLoadBatch / 2 : kLoadBatch;
  Raw kraw[kLoadBatch], vraw[kVBatch];
  const auto load_k = [&](int v0) {
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u)
      if (scored && v0 + u < RC) kraw[u] = load_kv_raw<KV>(krow + (v0 + u) * E);
  };
  const auto load_v = [&](int64_t jb) {
#pragma unroll
    for (int u = 0; u < kVBatch; ++u)
      if (sg < SG && jb + u * SG <= hi) vraw[u] = load_kv_raw<KV>(vcol + (jb + u * SG) * row);
  };
  // The paired form (two blocks per multiprocessor, at most 128 registers) cannot hold K and V batches at once:
  // there V is requested after the scores, during the softmax, while the other block computes.
  load_k(0);
  if constexpr (!kPaired) load_v(jv0);
#pragma unroll
  for (int r = 0; r < kQPerThread; ++r)
    if (tid + r * kDecodeThreads < G * d) qs[tid + r * kDecodeThreads] = qv[r];
  __syncthreads();

  // (1) Scores: thread t scores slot c0 + t against every query of the group.
  {
    float dot[G_MAX];
#pragma unroll
    for (int g = 0; g < G_MAX; ++g) dot[g] = 0.0f;
    if (scored) {
      for (int v0 = 0; v0 < RC; v0 += kLoadBatch) {  // kLoadBatch vectors of the row in flight
        if (v0 > 0) load_k(v0);
#pragma unroll
        for (int u = 0; u < kLoadBatch; ++u) {
          if (v0 + u >= RC) break;
          add_query_dots<KV>(kraw[u], qs, d, v0 + u, G, dot);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G_MAX; ++g)
      if (g < G) ps[g][tid] = scored ? dot[g] * score_scale : -INFINITY;
  }
  if constexpr (kPaired) load_v(jv0);
  __syncthreads();

  // (2) Softmax over the chunk (invalid slots hold -inf): warp g takes head g.
  if (warp < G) warp_softmax_in_place(ps[warp], C, &head_m[warp], &head_l[warp]);
  __syncthreads();

  // (3) acc[g] = sum over the chunk's visible slots of p[g][j] · v_j: thread (vector rc, slot group sg)
  // sums slots lo + sg, lo + sg + SG, ... of vector rc (the first kLoadBatch of them loaded above).
  float acc[G_MAX][E];
#pragma unroll
  for (int g = 0; g < G_MAX; ++g)
#pragma unroll
    for (int k = 0; k < E; ++k) acc[g][k] = 0.0f;
  if (sg < SG) {
    for (int64_t jb = jv0; jb <= hi; jb += kVBatch * static_cast<int64_t>(SG)) {  // kVBatch slots in flight
      if (jb != jv0) load_v(jb);
#pragma unroll
      for (int u = 0; u < kVBatch; ++u) {
        if (jb + u * SG > hi) break;
        float vv[E];
        kv_raw_to_floats<KV>(vraw[u], vv);
        const int t = static_cast<int>(jb + u * SG - c0);
#pragma unroll
        for (int g = 0; g < G_MAX; ++g) {
          if (g >= G) break;
          const float p = ps[g][t];
#pragma unroll
          for (int k = 0; k < E; ++k) acc[g][k] += p * vv[k];
        }
      }
    }
  }
  // Head by head: every thread's E sums into `part` (slot group sg's row), then feature i of the head
  // is the sum over the slot groups in order.
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int gg = 0; gg < G_MAX; ++gg)
      if (gg == g && sg < SG) {
#pragma unroll
        for (int k = 0; k < E; ++k) part[sg * d + rc * E + k] = acc[gg][k];
      }
    __syncthreads();
    const int64_t h = kvh * G + g;
    const float m = head_m[g], l = head_l[g];
    for (int i = tid; i < d; i += kDecodeThreads) {
      float o = 0.0f;
      for (int s = 0; s < SG; ++s) o += part[s * d + i];
      if (chunks == 0) {
        store_elem<OUT>(a.out, h * a.head_dim + i, o * (a.v_scales[kvh] / l));  // l > 0: the query's own slot
      } else {
        a.partial[(h * chunks + c) * (2 + a.head_dim) + 2 + i] = l > 0.0f ? o : 0.0f;
      }
    }
    if (chunks > 0 && tid == 0) {
      float* out = a.partial + (h * chunks + c) * (2 + a.head_dim);
      out[0] = m;
      out[1] = l;
    }
    __syncthreads();  // `part` is rewritten for the next head
  }
  static_assert(kWarpsPerBlock >= G_MAX);
}

// QLM_ATTENTION_DECODE=0 runs single-token decode in the per-(token, head) form (comparison, diagnosis).
bool decode_form_enabled() {
  static const bool enabled = env_switch_on("QLM_ATTENTION_DECODE");
  return enabled;
}

static_assert(KvVec<ElemType::F32>::E == 4 && KvVec<ElemType::F16>::E == 8 && KvVec<ElemType::BF16>::E == 8 &&
              KvVec<ElemType::F8E4M3>::E == 8 && KvVec<ElemType::F8E5M2>::E == 8);

// Whether the decode kernel serves this call: one token, a group the block's warps cover, head rows of
// whole vectors.
bool decode_kernel_applies(const AttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads, E = kv_vector_elems(a.kv_type);
  return a.tokens == 1 && group <= kDecodeMaxGroup && a.head_dim % E == 0 && a.head_dim / E <= kDecodeThreads;
}

// Whether the lanes form fits a call the decode kernel serves: the group's queries within its shared memory.
bool decode_lanes_fits(const AttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads;
  return group <= kLanesMaxGroup && group * a.head_dim <= kLanesMaxGroupDims;
}

// set_attention_lanes / QLM_ATTENTION_LANES (1 on wherever it fits, 0 off; unset: the rule).
ModeSwitch g_lanes("QLM_ATTENTION_LANES");

// The chunks of a call: a.chunks for a single token with split slots, else 0 (one block per (token, head)).
int64_t chunks_of(const AttentionArgs& a) { return a.split_slots > 0 && a.tokens == 1 ? a.chunks : 0; }
}  // namespace

AttentionForm attention_form(const AttentionArgs& a) {
  const int64_t chunks = chunks_of(a);
  // A single decode token without chunks runs the decode form only where every slot lies in chunk 0.
  const bool within_one_chunk = a.slots_bound > 0 ? a.slots_bound <= kAttentionChunkSlots
                                                  : a.past_dev == nullptr && a.past + 1 <= kAttentionChunkSlots;
  if (decode_form_enabled() && (chunks > 0 || within_one_chunk) && decode_kernel_applies(a)) {
    // The lanes form within one chunk (a block's slots are few there and the decode form scores them in one warp) and
    // over a few chunks (its clusters share each chunk's slots).
    const int lanes = g_lanes.mode();
    if (lanes != 0 && decode_lanes_fits(a) && (lanes == 1 || attention_lanes_by_rule(chunks)))
      return AttentionForm::DecodeLanes;
    const int64_t blocks = (chunks > 0 ? chunks : 1) * a.kv_heads;
    return a.sm_count > 0 && blocks > 2 * int64_t{a.sm_count} ? AttentionForm::DecodePaired : AttentionForm::Decode;
  }
  return chunks > 0 ? AttentionForm::PerHeadChunked : AttentionForm::PerHead;
}

const char* attention_form_name(AttentionForm form) {
  switch (form) {
    case AttentionForm::PerHead: return "per-head";
    case AttentionForm::PerHeadChunked: return "per-head chunked";
    case AttentionForm::Decode: return "decode";
    case AttentionForm::DecodePaired: return "decode paired";
    case AttentionForm::DecodeLanes: return "decode lanes";
  }
  return "?";
}

void set_attention_lanes(int mode) { g_lanes.force(mode); }

int64_t attention_chunks(int64_t tokens, int64_t slots_bound) {
  if (tokens != 1 || slots_bound <= kAttentionChunkSlots) return 0;
  return (slots_bound + kAttentionChunkSlots - 1) / kAttentionChunkSlots;
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  if (a.head_dim <= 0 || a.head_dim > kMaxAttentionHeadDim || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 ||
      a.tokens * a.heads > int64_t{0x7fffffff})
    return cudaErrorInvalidValue;
  const int64_t chunks = chunks_of(a);
  if (chunks > 0 && (a.partial == nullptr || a.split_slots != kAttentionChunkSlots || chunks > kCombineMaxChunks ||
                     chunks * a.heads > int64_t{0x7fffffff}))
    return cudaErrorInvalidValue;
  const AttentionForm form = attention_form(a);
  if (form == AttentionForm::DecodeLanes) {  // its own launcher (decode_lanes_attention.cu); the combine below
    const cudaError_t lanes = launch_decode_lanes(a, chunks, stream);
    if (lanes != cudaSuccess) return lanes;
  }
  cudaError_t status = cudaSuccess;
  const cudaError_t dispatched = dispatch_kv(a.kv_type, [&](auto kv_tag) {
    status = dispatch(a.out_type, [&](auto out_tag) {
      constexpr ElemType KV = decltype(kv_tag)::value, OUT = decltype(out_tag)::value;
      const unsigned threads = kWarps * 32;
      if (form == AttentionForm::Decode || form == AttentionForm::DecodePaired) {
        const unsigned grid = static_cast<unsigned>((chunks > 0 ? chunks : 1) * a.kv_heads);
        const auto launch = [&](auto kernel) { launch_pdl(kernel, grid, kDecodeThreads, 0, stream, a, chunks); };
        const bool paired = form == AttentionForm::DecodePaired;
        if (a.heads / a.kv_heads > kDecodeSmallGroup)
          paired ? launch(decode_attention_kernel<KV, OUT, kDecodeMaxGroup, true>)
                 : launch(decode_attention_kernel<KV, OUT, kDecodeMaxGroup, false>);
        else
          paired ? launch(decode_attention_kernel<KV, OUT, kDecodeSmallGroup, true>)
                 : launch(decode_attention_kernel<KV, OUT, kDecodeSmallGroup, false>);
      } else if (form == AttentionForm::PerHeadChunked) {
        launch_pdl(attention_chunk_kernel<KV>, static_cast<unsigned>(chunks * a.heads), threads, 0, stream, a, chunks);
      } else if (form == AttentionForm::PerHead) {
        launch_pdl(attention_kernel<KV, OUT>, static_cast<unsigned>(a.tokens * a.heads), threads, 0, stream, a);
      }
      if (chunks > 0)  // either chunk kernel wrote partial states
        launch_pdl(attention_combine_kernel<OUT>, static_cast<unsigned>(a.heads), kCombineThreads,
                   static_cast<size_t>(chunks) * sizeof(float), stream, a, chunks);
    });
  });
  return dispatched != cudaSuccess ? dispatched : status;
}

}  // namespace qlm::ops::cu
