#include "runtime/ops/cuda/device_ops.h"

#ifdef QLM_WITH_CUDA
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/device_memory.h"
#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "runtime/ops/cuda/elem_type.h"

namespace qlm::ops::cu {

namespace {

cudaStream_t stream_of(const Tensor& t) {
  QLM_CHECK(!t.on_host());
  return qlm::cuda::context(t.device().index).stream;
}

void check_f32_matrix(const Tensor& t) {
  QLM_CHECK(!t.on_host() && t.dtype() == DType::F32 && t.dim() == 2 && t.is_contiguous());
}

}  // namespace

Tensor embedding(const Tensor& table, std::span<const int32_t> ids, DType out) {
  QLM_CHECK(!ids.empty());
  const int64_t rows = static_cast<int64_t>(ids.size());
  const Tensor device_ids =
      Tensor::from_vector(std::vector<int32_t>(ids.begin(), ids.end()), {rows}).to_device(table.device());
  return embedding(table, device_ids.data<int32_t>(), rows, out);
}

Tensor embedding(const Tensor& table, const int32_t* device_ids, int64_t rows, DType out) {
  QLM_CHECK(!table.on_host() && table.dim() == 2 && table.is_contiguous() && rows > 0);
  Tensor y = Tensor::empty({rows, table.size(1)}, out, table.device());
  QLM_CUDA_CHECK(launch_embedding(table.raw_data(), elem_type(table.dtype()), device_ids, rows, table.size(1),
                                  y.raw_data(), elem_type(out), stream_of(table)));
  return y;
}

Tensor rms_norm(const Tensor& x, int64_t row0, int64_t rows, const Tensor& weight, float eps, DType out,
                bool next_first) {
  check_f32_matrix(x);
  const int64_t dim = x.size(1);
  QLM_CHECK(row0 >= 0 && rows > 0 && row0 + rows <= x.size(0));
  QLM_CHECK(!weight.on_host() && weight.dtype() == DType::F32 && weight.numel() == dim);
  Tensor y = Tensor::empty({rows, dim}, out, x.device());
  QLM_CUDA_CHECK(launch_rms_norm(x.data<float>() + row0 * dim, dim, weight.data<float>(), y.raw_data(), elem_type(out),
                                 dim, rows, 1, dim, eps, stream_of(x), next_first));
  return y;
}

Tensor add_rms_norm(Tensor& x, const Tensor& add, int64_t row0, int64_t rows, const Tensor& weight, float eps,
                    DType out, bool next_first) {
  if (!add.defined()) return rms_norm(x, row0, rows, weight, eps, out, next_first);
  check_f32_matrix(x);
  const int64_t dim = x.size(1);
  QLM_CHECK(row0 >= 0 && rows > 0 && row0 + rows <= x.size(0));
  QLM_CHECK(add.shape() == x.shape() && add.is_contiguous() && !add.on_host() && add.device() == x.device());
  QLM_CHECK(!weight.on_host() && weight.dtype() == DType::F32 && weight.numel() == dim);
  Tensor y = Tensor::empty({rows, dim}, out, x.device());
  const size_t add_offset = static_cast<size_t>(row0 * dim) * dtype_size(add.dtype());
  QLM_CUDA_CHECK(launch_add_rms_norm(x.data<float>() + row0 * dim, add.raw_data() + add_offset, elem_type(add.dtype()),
                                     weight.data<float>(), y.raw_data(), elem_type(out), rows, dim, eps, stream_of(x),
                                     next_first));
  return y;
}

void head_rms_norm(Tensor& x, int64_t col0, int64_t heads, int64_t head_dim, const Tensor& weight, float eps) {
  check_f32_matrix(x);
  const int64_t stride = x.size(1);
  QLM_CHECK(col0 >= 0 && col0 + heads * head_dim <= stride);
  QLM_CHECK(!weight.on_host() && weight.dtype() == DType::F32 && weight.numel() == head_dim);
  float* base = x.data<float>() + col0;
  QLM_CUDA_CHECK(launch_rms_norm(base, stride, weight.data<float>(), base, ElemType::F32, stride, x.size(0), heads,
                                 head_dim, eps, stream_of(x)));
}

void add_residual(Tensor& x, const Tensor& y) {
  QLM_CHECK(x.dtype() == DType::F32 && x.shape() == y.shape() && x.is_contiguous() && y.is_contiguous());
  QLM_CHECK(!x.on_host() && x.device() == y.device());
  QLM_CUDA_CHECK(launch_add_residual(x.data<float>(), y.raw_data(), elem_type(y.dtype()), x.numel(), stream_of(x)));
}

Tensor to_f32(const Tensor& x) {
  QLM_CHECK(!x.on_host() && x.is_contiguous());
  if (x.dtype() == DType::F32) return x;
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  QLM_CUDA_CHECK(launch_to_f32(x.raw_data(), elem_type(x.dtype()), y.data<float>(), x.numel(), stream_of(x)));
  return y;
}

Tensor silu_and_mul(const Tensor& gate_up) {
  QLM_CHECK(!gate_up.on_host() && gate_up.dim() == 2 && gate_up.is_contiguous() && gate_up.size(1) % 2 == 0);
  const int64_t rows = gate_up.size(0), width = gate_up.size(1) / 2;
  Tensor y = Tensor::empty({rows, width}, gate_up.dtype(), gate_up.device());
  QLM_CUDA_CHECK(launch_silu_and_mul(gate_up.raw_data(), y.raw_data(), elem_type(gate_up.dtype()), rows, width,
                                     stream_of(gate_up)));
  return y;
}

DeviceRope upload_rope(const RopeAngles& angles, int64_t tokens, Device device) {
  QLM_CHECK(static_cast<int64_t>(angles.cos.size()) == tokens * angles.half && angles.sin.size() == angles.cos.size());
  DeviceRope rope;
  rope.half = angles.half;
  rope.tokens = tokens;
  rope.cos = Tensor::from_vector(angles.cos, {tokens, angles.half}).to_device(device);
  rope.sin = Tensor::from_vector(angles.sin, {tokens, angles.half}).to_device(device);
  return rope;
}

DecodeStepInputs make_decode_step_inputs(const RopeParams& rope, Device device) {
  const int64_t half = rope.rotary_dim / 2;  // rope_angles' pairs
  QLM_CHECK(half >= 0 && !device.is_cpu());
  DecodeStepInputs in;
  in.buffer = Tensor::zeros({2 + 2 * half}, DType::F32, device);
  in.rope.half = half;
  in.rope.tokens = 1;
  in.rope.cos = in.buffer.narrow(0, 2, half).view({1, half});
  in.rope.sin = in.buffer.narrow(0, 2 + half, half).view({1, half});
  in.scratch = Tensor::zeros({kDecodeAdvanceScratch}, DType::I32, device);
  return in;
}

void write_decode_step_inputs(DecodeStepInputs& in, int32_t token, int64_t position, const RopeParams& rope) {
  QLM_CHECK(position >= 0 && position <= INT32_MAX);  // slots are int32 on the device
  const int32_t slot = static_cast<int32_t>(position);
  const RopeAngles angles = rope_angles(rope, std::span<const int64_t>(&position, 1));
  const int64_t half = in.rope.half;
  QLM_CHECK(angles.half == half && static_cast<int64_t>(angles.cos.size()) == half &&
            static_cast<int64_t>(angles.sin.size()) == half);
  Tensor host = Tensor::empty({2 + 2 * half}, DType::F32);
  float* h = host.data<float>();
  std::memcpy(h, &token, sizeof(token));
  std::memcpy(h + 1, &slot, sizeof(slot));
  std::copy(angles.cos.begin(), angles.cos.end(), h + 2);
  std::copy(angles.sin.begin(), angles.sin.end(), h + 2 + half);
  copy_tensor_bytes(in.buffer, host);
}

void decode_advance(const Tensor& logits, DecodeStepInputs& in, const Tensor& table) {
  check_f32_matrix(logits);
  QLM_CHECK(logits.size(0) == 1 && table.dim() == 2 && !table.on_host() && table.dtype() == DType::F32 &&
            table.size(1) == 2 * in.rope.half);
  QLM_CUDA_CHECK(launch_decode_advance(logits.data<float>(), logits.size(1), in.step(), in.buffer.data<float>() + 2,
                                       table.data<float>(), table.size(0), in.rope.half, in.scratch.data<int32_t>(),
                                       stream_of(logits)));
}

Tensor rope_table(const RopeParams& params, int64_t positions, Device device) {
  RopeTable t = ops::rope_table(params, positions);
  return Tensor::from_vector(std::move(t.rows), {positions, 2 * t.half}).to_device(device);
}

void apply_rope(const DeviceRope& rope, Tensor& x, int64_t col0, int64_t heads, int64_t head_dim) {
  check_f32_matrix(x);
  QLM_CHECK(x.size(0) == rope.tokens && 2 * rope.half <= head_dim && col0 + heads * head_dim <= x.size(1));
  QLM_CUDA_CHECK(launch_rotary(x.data<float>() + col0, x.size(1), rope.tokens, heads, head_dim, rope.cos.data<float>(),
                               rope.sin.data<float>(), rope.half, stream_of(x)));
}

Tensor prepare_attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, int64_t head_dim, const DeviceRope& rope,
                         const Tensor& q_norm, const Tensor& k_norm, float eps, DeviceKvCache& cache, int64_t layer,
                         int64_t slot0, const int32_t* slot0_dev) {
  QLM_CHECK(!qkv.on_host() && qkv.dim() == 2 && qkv.is_contiguous());
  const int64_t tokens = qkv.size(0);
  QLM_CHECK(qkv.size(1) == (heads + 2 * kv_heads) * head_dim && tokens == rope.tokens);
  QLM_CHECK(kv_heads == cache.kv_heads() && head_dim == cache.head_dim() && 2 * rope.half <= head_dim);
  for (const Tensor* w : {&q_norm, &k_norm})
    QLM_CHECK(!w->defined() || (!w->on_host() && w->dtype() == DType::F32 && w->numel() == head_dim));
  if (head_dim > kMaxAttentionHeadDim)
    fail("device.unsupported", {}, "run this model with --device cpu",
         "CUDA attention supports head_dim up to {}, the model has {}", kMaxAttentionHeadDim, head_dim);
  const DeviceKvCache::WriteTarget target = cache.write_target(layer, slot0, tokens);
  Tensor q = Tensor::empty({tokens, heads * head_dim}, DType::F32, qkv.device());
  QkvPrepareArgs a;
  a.qkv = qkv.raw_data();
  a.qkv_type = elem_type(qkv.dtype());
  a.tokens = tokens;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.cos = rope.cos.data<float>();
  a.sin = rope.sin.data<float>();
  a.half = rope.half;
  a.q_norm = q_norm.defined() ? q_norm.data<float>() : nullptr;
  a.k_norm = k_norm.defined() ? k_norm.data<float>() : nullptr;
  a.eps = eps;
  a.q_out = q.data<float>();
  a.k_cache = target.k;
  a.v_cache = target.v;
  a.cache_type = kv_elem_type(cache.encoding().dtype);
  a.slot0 = slot0;
  a.slot0_dev = slot0_dev;
  a.k_scales = target.k_scales;
  a.v_scales = target.v_scales;
  QLM_CUDA_CHECK(launch_qkv_prepare(a, stream_of(qkv)));
  return q;
}

namespace {

// What decides attention()'s kernels (launch.h, AttentionForm): everything but the data pointers.
AttentionArgs attention_shape_args(int64_t tokens, int64_t past, const DeviceKvCache& cache, const AttentionParams& p) {
  AttentionArgs a;
  a.tokens = tokens;
  a.past = past;
  a.kv_type = kv_elem_type(cache.encoding().dtype);
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.scale = p.scale;
  a.sliding_window = p.sliding_window;
  a.slots_bound = cache.capacity();
  a.sm_count = qlm::cuda::context(cache.device().index).sm_count;
  if (const int64_t chunks = attention_chunks(tokens, cache.capacity()); chunks > 0) {
    a.split_slots = kAttentionChunkSlots;
    a.chunks = chunks;
  }
  return a;
}

}  // namespace

Tensor attention(const Tensor& qkv, int64_t past, const DeviceKvCache& cache, int64_t layer, const AttentionParams& p,
                 DType out, const int32_t* past_dev) {
  check_f32_matrix(qkv);
  const int64_t tokens = qkv.size(0);
  QLM_CHECK(p.kv_heads == cache.kv_heads() && p.head_dim == cache.head_dim() && p.heads % p.kv_heads == 0);
  QLM_CHECK(past >= 0 && past + tokens <= cache.capacity() && p.heads * p.head_dim <= qkv.size(1));
  QLM_CHECK(qkv.device() == cache.device());
  if (p.head_dim > kMaxAttentionHeadDim)
    fail("device.unsupported", {}, "run this model with --device cpu",
         "CUDA attention supports head_dim up to {}, the model has {}", kMaxAttentionHeadDim, p.head_dim);
  Tensor y = Tensor::empty({tokens, p.heads * p.head_dim}, out, qkv.device());
  AttentionArgs a = attention_shape_args(tokens, past, cache, p);
  a.q = qkv.data<float>();
  a.q_stride = qkv.size(1);
  a.past_dev = past_dev;
  a.k = cache.k(layer).raw_data();
  a.v = cache.v(layer).raw_data();
  a.k_scales = cache.device_k_scales(layer);  // uploaded by the cache write of this forward
  a.v_scales = cache.device_v_scales(layer);
  a.out = y.raw_data();
  a.out_type = elem_type(out);
  a.out_stride = p.heads * p.head_dim;
  Tensor partial;  // chunked decode: per (head, chunk) softmax states
  if (a.chunks > 0) {
    partial = Tensor::empty({p.heads * a.chunks * (2 + p.head_dim)}, DType::F32, qkv.device());
    a.partial = partial.data<float>();
  }
  QLM_CUDA_CHECK(launch_attention(a, stream_of(qkv)));
  return y;
}

std::string attention_form(int64_t tokens, int64_t past, const DeviceKvCache& cache, const AttentionParams& p) {
  return attention_form_name(attention_form(attention_shape_args(tokens, past, cache, p)));
}

int attention_lanes_parts(int64_t tokens, int64_t past, const DeviceKvCache& cache, const AttentionParams& p) {
  const AttentionArgs a = attention_shape_args(tokens, past, cache, p);
  return attention_form(a) == AttentionForm::DecodeLanes ? decode_lanes_parts(a, a.chunks) : 0;
}

}  // namespace qlm::ops::cu
#endif
