// DecoderModel on a CUDA device: the same step as the CPU forward in decoder_model.cc, with every
// tensor on the device. The residual stream x is F32; RMSNorm writes the linear inputs in the
// context's act dtype; one kernel takes the qkv output to F32 queries (q/k norm, rotary) and the
// cache's K / V rows; attention's output goes back to the act dtype for o_proj. Mixture-of-experts layers route and
// run their experts on the device too (MoEBlock, F32 output). Only the final logits are copied to the
// host (as F32).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "models/decoder_model.h"

#ifdef QLM_WITH_CUDA
#include "core/device_memory.h"
#include "core/env_switch.h"
#include "cuda/step_readback.h"
#include "runtime/ops/cuda/device_ops.h"
#endif

namespace qlm::models {

#ifdef QLM_WITH_CUDA

namespace {
Tensor upload_f32(const std::vector<float>& values, Device device) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to_device(device);
}

// Which RMSNorms let the next kernel launch before they wait for the previous one (ops::cu::add_rms_norm's
// next_first), as bits of QLM_NORM_NEXT_FIRST: the norm before the qkv projection, the one before the MLP (gate/up or
// the experts), the final one before lm_head. Default: the one before qkv, the only bit that gained on both shapes
// (session 48, H100, two rounds: 8B +0.5 %, 70B:8 +0.6 %; before the MLP 8B -1.9 %, 70B:8 +1.2 %; before lm_head
// within 0.3 %; docs/perf-data/decode_norm_next_first_h100_s48.jsonl).
enum NormNextFirst : int64_t { kBeforeQkv = 1, kBeforeMlp = 2, kBeforeLmHead = 4 };
bool norm_next_first(NormNextFirst which) {
  static const int64_t bits = env_int("QLM_NORM_NEXT_FIRST", kBeforeQkv);
  return (bits & which) != 0;
}
}  // namespace

void DecoderModel::finish_load_device() {
  const Device device = options_.ctx.device;
  device_embedding_ = embedding_.to_device(device);
  device_final_norm_ = upload_f32(final_norm_, device);
  device_norms_.resize(blocks_.size());
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    DeviceNorms& d = device_norms_[i];
    d.input_norm = upload_f32(b.input_norm, device);
    d.post_norm = upload_f32(b.post_norm, device);
    if (config_.qk_norm) {
      d.q_norm = upload_f32(b.q_norm, device);
      d.k_norm = upload_f32(b.k_norm, device);
    }
  }
}

Tensor DecoderModel::forward_device(std::span<const int32_t> tokens, std::span<const int64_t> positions,
                                    bool all_logits) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t past = device_cache_->length();
  QLM_CHECK(T > 0 && positions.size() == tokens.size());
  for (int64_t t = 0; t < T; ++t) QLM_CHECK(positions[static_cast<size_t>(t)] == past + t);
  for (int32_t id : tokens) QLM_CHECK(id >= 0 && id < config_.vocab_size);
  if (T == 1 && device_warm_) {
    if (std::optional<Tensor> logits = decode_with_graph(tokens[0], positions[0])) return *std::move(logits);
  }
  device_cache_->reserve(past + T);
  const ops::cu::DeviceRope rope =
      ops::cu::upload_rope(ops::rope_angles(config_.rope, positions), T, options_.ctx.device);
  Tensor x = ops::cu::embedding(device_embedding_, tokens, DType::F32);
  Tensor logits = run_device_layers(std::move(x), past, rope, all_logits, nullptr).to_device(Device::cpu());
  device_cache_->commit(T);
  device_warm_ = true;
  return logits;
}

namespace {
// QLM_PREPARE_ATTENTION=0: the widening, head norms, rotary and cache write as separate kernels (the
// path before prepare_attention; comparison and diagnosis).
bool separate_attention_prep() {
  static const bool separate = !env_switch_on("QLM_PREPARE_ATTENTION");
  return separate;
}
}  // namespace

Tensor DecoderModel::prepare_attention_separately(const Tensor& qkv_out, const DeviceNorms& norms, float eps,
                                                  const ops::cu::DeviceRope& rope, int64_t layer, int64_t past,
                                                  const int32_t* past_slot) {
  const int64_t d = config_.head_dim, k_col = heads_ * d, v_col = (heads_ + kv_heads_) * d;
  Tensor qkv = ops::cu::to_f32(qkv_out);
  if (config_.qk_norm) {
    ops::cu::head_rms_norm(qkv, 0, heads_, d, norms.q_norm, eps);
    ops::cu::head_rms_norm(qkv, k_col, kv_heads_, d, norms.k_norm, eps);
  }
  ops::cu::apply_rope(rope, qkv, 0, heads_ + kv_heads_, d);  // q and k heads: adjacent columns
  device_cache_->write(layer, past, qkv, k_col, v_col, past_slot);
  return qkv;  // attention reads the q columns
}

Tensor DecoderModel::run_device_layers(Tensor x, int64_t past, const ops::cu::DeviceRope& rope, bool all_logits,
                                       const int32_t* past_slot) {
  const DType act = options_.ctx.act_dtype;
  const int64_t T = x.size(0), d = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  // Each residual add runs inside the RMSNorm that follows it (add_rms_norm): `pending` is the last
  // layer output not yet added to x.
  Tensor pending;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    Block& b = blocks_[static_cast<size_t>(l)];
    const DeviceNorms& norms = device_norms_[static_cast<size_t>(l)];

    // Attention: the q | k | v columns of the qkv output become F32 queries (q/k norm, rotary) and K / V
    // rows of the cache in one kernel.
    const Tensor qkv = b.qkv->forward(
        ops::cu::add_rms_norm(x, pending, 0, T, norms.input_norm, eps, act, norm_next_first(kBeforeQkv)));
    QLM_CHECK(qkv.size(1) == (heads_ + 2 * kv_heads_) * d);
    const Tensor q = separate_attention_prep()
                         ? prepare_attention_separately(qkv, norms, eps, rope, l, past, past_slot)
                         : ops::cu::prepare_attention(qkv, heads_, kv_heads_, d, rope, norms.q_norm, norms.k_norm, eps,
                                                      *device_cache_, l, past, past_slot);
    const ops::AttentionParams params{.heads = heads_, .kv_heads = kv_heads_, .head_dim = d, .scale = scale,
                                      .sliding_window = config_.sliding_window[static_cast<size_t>(l)]};
    const Tensor attn_out = b.o->forward(ops::cu::attention(q, past, *device_cache_, l, params, act, past_slot));

    // MLP: routed experts (MoEBlock, F32 output) or the dense gate|up / down.
    const Tensor h = ops::cu::add_rms_norm(x, attn_out, 0, T, norms.post_norm, eps, act, norm_next_first(kBeforeMlp));
    pending = b.moe ? b.moe->forward(h) : b.down->forward(ops::cu::silu_and_mul(b.gate_up->forward(h)));
  }
  // x is not used after the final norm, so only its normed rows get the last layer's output.
  const int64_t rows = all_logits ? T : 1;
  Tensor logits = lm_head_->forward(
      ops::cu::add_rms_norm(x, pending, T - rows, rows, device_final_norm_, eps, act, norm_next_first(kBeforeLmHead)));
  if (gather_logits_) logits = options_.tp.comm->all_gather(logits, 1);  // vocab-split lm_head (NCCL)
  return ops::cu::to_f32(logits);
}

std::string DecoderModel::decode_graph_obstacle() const {
  if (!options_.cuda_graph) return "off (--cuda-graph off)";
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].moe)
      if (const std::string why = blocks_[i].moe->device_host_wait(1); !why.empty())
        return fmt::format("mixture-of-experts layer {}: {}", i, why);
  return "";
}

DecoderModel::DecodeGraph* DecoderModel::decode_graph(int64_t position) {
  if (decode_eager_) return nullptr;
  if (const std::string obstacle = decode_graph_obstacle(); !obstacle.empty()) {
    decode_eager_ = true;
    decode_graph_status_ = fmt::format("eager: {}", obstacle);
    return nullptr;
  }
  if (position > 0x7fffffff) return nullptr;  // slots are int32 on the device
  if (decode_graph_ && decode_graph_->cache_generation == device_cache_->generation()) return decode_graph_.get();
  const Device device = options_.ctx.device;
  decode_graph_.reset();  // its scratch memory stays in the capture pool for the next capture
  auto g = std::make_unique<DecodeGraph>();
  g->inputs = ops::cu::make_decode_step_inputs(config_.rope, device);
  g->rope_table = ops::cu::rope_table(config_.rope, device_cache_->capacity(), device);
  std::string why;
  try {
    g->graph = cuda::CapturedGraph::capture(device.index, [&] {
      int32_t* step = g->inputs.step();
      Tensor x = ops::cu::embedding(device_embedding_, step, 1, DType::F32);
      g->logits = run_device_layers(std::move(x), position, g->inputs.rope, false, step + 1);
      ops::cu::decode_advance(g->logits, g->inputs, g->rope_table);
    }, &why);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!g->graph) {
    decode_eager_ = true;
    decode_graph_status_ = fmt::format("eager: the decode step could not be captured as a CUDA graph: {}", why);
    return nullptr;
  }
  g->cache_generation = device_cache_->generation();
  decode_graph_status_ = fmt::format("graph ({})", g->graph->node_summary());
  // QLM_GRAPH_DOT=path: the decode step's graph in Graphviz form (diagnosis), rewritten at each capture.
  if (const char* dot = std::getenv("QLM_GRAPH_DOT"); dot != nullptr && *dot != '\0' && !g->graph->write_dot(dot))
    std::fprintf(stderr, "qlm: could not write the decode graph to QLM_GRAPH_DOT=%s\n", dot);
  decode_graph_ = std::move(g);
  return decode_graph_.get();
}

std::optional<Tensor> DecoderModel::decode_with_graph(int32_t token, int64_t position) {
  device_cache_->reserve(position + 1);
  DecodeGraph* g = decode_graph(position);
  if (g == nullptr) return std::nullopt;
  ops::cu::write_decode_step_inputs(g->inputs, token, position, config_.rope);
  g->graph->launch();
  Tensor logits = g->logits.to_device(Device::cpu());
  device_cache_->commit(1);
  return logits;
}

std::optional<int64_t> DecoderModel::decode_greedy(int32_t token, int64_t max_steps,
                                                   const std::function<bool(int32_t)>& on_token) {
  if (!on_device() || !device_warm_) return std::nullopt;
  QLM_CHECK(token >= 0 && token < config_.vocab_size);
  // In segments: the cache is reserved for a segment's slots before its steps are queued (growing it moves the
  // storage, which the queued replays read), and grows geometrically as single steps grow it.
  constexpr int64_t kSegment = 256;
  int64_t kept = 0;
  bool more = max_steps > 0;
  while (more && kept < max_steps) {
    const int64_t p0 = device_cache_->length();
    const int64_t steps = std::min(kSegment, max_steps - kept);
    device_cache_->reserve(p0 + steps);
    DecodeGraph* g = decode_graph(p0);
    if (g == nullptr) {
      if (kept == 0) return std::nullopt;
      fail("model.decode", {}, "", "the decode step could no longer run as a CUDA graph: {}", decode_graph_status_);
    }
    ops::cu::write_decode_step_inputs(g->inputs, token, p0, config_.rope);
    cuda::StepReadback readback(options_.ctx.device.index, kDecodeAhead);
    int64_t queued = 0, done = 0;
    while (more && done < steps) {
      for (; queued < steps && queued - done < kDecodeAhead; ++queued) {
        g->graph->launch();
        readback.enqueue(queued, g->inputs.step());
      }
      token = readback.wait(done++);
      device_cache_->commit(1);
      ++kept;
      more = on_token(token);
    }
    // The replays queued past the last kept step wrote slots the cache does not count; the readback's destructor
    // waits for them.
  }
  return kept;
}

#else  // no CUDA backend: Model::load rejects CUDA devices before a DecoderModel exists

std::optional<int64_t> DecoderModel::decode_greedy(int32_t, int64_t, const std::function<bool(int32_t)>&) {
  return std::nullopt;
}

void DecoderModel::finish_load_device() {
  fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed, or use --device cpu",
       "{} needs the CUDA backend, which this qlm was built without", options_.ctx.device.str());
}

Tensor DecoderModel::forward_device(std::span<const int32_t>, std::span<const int64_t>, bool) {
  fail("device.unavailable", {}, "rebuild qlm with the CUDA toolkit installed, or use --device cpu",
       "{} needs the CUDA backend, which this qlm was built without", options_.ctx.device.str());
}

#endif

}  // namespace qlm::models
