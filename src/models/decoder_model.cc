#include "models/decoder_model.h"

#include <cmath>
#include <cstring>

#include "core/float_convert.h"
#include "runtime/ops/activation.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/rms_norm.h"
#include "runtime/ops/rope.h"

namespace qlm::models {

namespace {

const std::string kEmbed = "model.embed_tokens.weight";
const std::string kFinalNorm = "model.norm.weight";

std::string layer_prefix(int64_t i) { return fmt::format("model.layers.{}", i); }

LinearSpec linear_spec(std::string prefix, LinearKind kind, int64_t input_size, int64_t output_size, bool bias) {
  LinearSpec spec;
  spec.prefix = std::move(prefix);
  spec.kind = kind;
  spec.input_size = input_size;
  spec.output_size = output_size;
  spec.bias = bias;
  return spec;
}

std::vector<float> to_f32_vector(const Tensor& t) { return t.to(DType::F32).to_float_vector(); }

void add_in_place(Tensor& x, const Tensor& y) {
  QLM_CHECK(x.shape() == y.shape() && x.is_contiguous() && y.is_contiguous());
  float* a = x.data<float>();
  const float* b = y.data<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) a[i] += b[i];
}

}  // namespace

TensorDtypeLookup checkpoint_dtypes(const io::Checkpoint& checkpoint) {
  return [&checkpoint](std::string_view name) -> std::optional<DType> {
    if (!checkpoint.contains(name)) return std::nullopt;
    return checkpoint.info(name).dtype;
  };
}

DecoderModel::DecoderModel(ModelConfig config, const RankOptions& options, const TensorDtypeLookup& dtypes)
    : config_(std::move(config)), options_(options) {
  declare(dtypes);
}

void DecoderModel::declare(const TensorDtypeLookup& dtypes) {
  const ModelConfig& c = config_;
  const DType fallback = c.dtype;
  auto dense_dtype = [&](const std::string& name) {
    const auto d = dtypes(name);
    return d && is_wide_float(*d) ? *d : fallback;
  };
  auto add_linear = [&](LinearSpec spec) -> LinearLayer* {
    const std::vector<std::string> parts = spec.shard_prefixes.empty() ? std::vector<std::string>{spec.prefix}
                                                                       : spec.shard_prefixes;
    spec.params_dtype = linear_params_dtype(dtypes, parts, fallback);
    return &modules_.add_linear(std::move(spec), options_.quant, options_.ctx, options_.tp);
  };

  modules_.add_dense(kEmbed, {c.vocab_size, c.hidden_size}, dense_dtype(kEmbed));
  modules_.add_dense(kFinalNorm, {c.hidden_size}, dense_dtype(kFinalNorm));
  modules_.add_stacked(llama_stacked_params());
  modules_.ignore("rotary_emb.inv_freq");

  blocks_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = layer_prefix(i), attn = p + ".self_attn.", mlp = p + ".mlp.";
    Block& b = blocks_[static_cast<size_t>(i)];
    LinearSpec qkv = linear_spec(attn + "qkv_proj", LinearKind::QKV, c.hidden_size, 0, c.qkv_bias);
    qkv.head_size = c.head_dim;
    qkv.total_num_heads = c.num_heads;
    qkv.total_num_kv_heads = c.num_kv_heads;
    qkv.shard_prefixes = {attn + "q_proj", attn + "k_proj", attn + "v_proj"};
    b.qkv = add_linear(std::move(qkv));
    b.o = add_linear(linear_spec(attn + "o_proj", LinearKind::Row, c.num_heads * c.head_dim, c.hidden_size, c.o_bias));
    if (c.moe.is_sparse(i)) {
      b.moe = std::make_unique<MoEBlock>(c, i, options_.quant, options_.ctx, options_.tp, dtypes, modules_);
    } else {
      LinearSpec gate_up = linear_spec(mlp + "gate_up_proj", LinearKind::MergedColumn, c.hidden_size, 0, c.mlp_bias);
      gate_up.output_sizes = {c.intermediate_size, c.intermediate_size};
      gate_up.shard_prefixes = {mlp + "gate_proj", mlp + "up_proj"};
      b.gate_up = add_linear(std::move(gate_up));
      b.down = add_linear(
          linear_spec(mlp + "down_proj", LinearKind::Row, c.intermediate_size, c.hidden_size, c.mlp_bias));
    }
    for (const char* norm : {".input_layernorm.weight", ".post_attention_layernorm.weight"})
      modules_.add_dense(p + norm, {c.hidden_size}, dense_dtype(p + norm));
    if (c.qk_norm)
      for (const char* norm : {"q_norm.weight", "k_norm.weight"})
        modules_.add_dense(attn + norm, {c.head_dim}, dense_dtype(attn + norm));
  }
  heads_ = blocks_.front().qkv->num_heads();
  kv_heads_ = blocks_.front().qkv->num_kv_heads();

  // A column-parallel lm_head needs the vocabulary to split evenly; otherwise every rank holds it whole.
  const int tp = options_.tp.size;
  const bool column = tp > 1 && c.vocab_size % tp == 0;
  gather_logits_ = column;
  LinearSpec head = linear_spec("lm_head", column ? LinearKind::Column : LinearKind::Replicated, c.hidden_size,
                                c.vocab_size, false);
  head.info_kind = LayerInfo::Kind::LmHead;
  if (c.tie_word_embeddings) {
    // The embedding matrix is the output projection; a checkpoint that also stores it is fine.
    head.params_dtype = dense_dtype(kEmbed);
    tied_lm_head_ = std::make_unique<LinearLayer>(std::move(head), nullptr, options_.ctx, options_.tp);
    lm_head_ = tied_lm_head_.get();
    modules_.ignore("lm_head.weight");
  } else {
    lm_head_ = add_linear(std::move(head));
  }
  if (on_device())
    device_cache_ = std::make_unique<ops::cu::DeviceKvCache>(options_.ctx.device, c.num_layers, kv_heads_, c.head_dim,
                                                             options_.kv);
  else
    cache_ = std::make_unique<ops::KvCache>(c.num_layers, kv_heads_, c.head_dim, options_.kv);
}

std::vector<const FusedMoE*> DecoderModel::moe_layers() const {
  std::vector<const FusedMoE*> out;
  for (const Block& b : blocks_)
    if (b.moe) out.push_back(&b.moe->experts());
  return out;
}

int64_t DecoderModel::cache_length() const { return cache_ ? cache_->length() : device_cache_->length(); }

void DecoderModel::truncate_cache(int64_t length) {
  if (cache_)
    cache_->truncate(length);
  else
    device_cache_->truncate(length);
}

int64_t DecoderModel::first_kv_head() const {
  // As the QKV layer slices k/v: rank r holds kv heads [r·kv_heads, ...), or, when the heads are
  // replicated over ranks (tp > num_key_value_heads), head r / replicas.
  const int64_t replicas = blocks_.front().qkv->num_kv_head_replicas();
  return options_.tp.rank / replicas * kv_heads_;
}

void DecoderModel::set_kv_cache_scales(int64_t layer, std::span<const float> k_scales,
                                       std::span<const float> v_scales) {
  if (cache_)
    cache_->set_head_scales(layer, k_scales, v_scales);
  else
    device_cache_->set_head_scales(layer, k_scales, v_scales);
}

LoadReport DecoderModel::load(const io::Checkpoint& checkpoint, const ProgressCallback& progress) {
  LoadReport report = load_checkpoint(checkpoint, modules_, progress);
  finish_load();
  return report;
}

LoadReport DecoderModel::load(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  LoadReport report = load_tensors(tensors, modules_);
  finish_load();
  return report;
}

void DecoderModel::finish_load() {
  embedding_ = modules_.dense(kEmbed);
  final_norm_ = to_f32_vector(modules_.dense(kFinalNorm));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    const std::string p = layer_prefix(static_cast<int64_t>(i));
    b.input_norm = to_f32_vector(modules_.dense(p + ".input_layernorm.weight"));
    b.post_norm = to_f32_vector(modules_.dense(p + ".post_attention_layernorm.weight"));
    if (b.moe) b.moe->finish_load();
    if (config_.qk_norm) {
      b.q_norm = to_f32_vector(modules_.dense(p + ".self_attn.q_norm.weight"));
      b.k_norm = to_f32_vector(modules_.dense(p + ".self_attn.k_norm.weight"));
    }
  }
  if (tied_lm_head_) {
    tied_lm_head_->load_weight("weight", embedding_, ShardId::whole(), kEmbed);
    tied_lm_head_->finalize();
  }
  if (on_device()) finish_load_device();
}

Tensor DecoderModel::embed(std::span<const int32_t> tokens) const {
  const int64_t H = config_.hidden_size, T = static_cast<int64_t>(tokens.size());
  Tensor x = Tensor::empty({T, H}, DType::F32);
  float* out = x.data<float>();
  const std::byte* table = embedding_.raw_data();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = tokens[static_cast<size_t>(t)];
    QLM_CHECK(id >= 0 && id < config_.vocab_size);
    float* row = out + t * H;
    // declare() admits only the wide float types (never F64) for the embedding.
    if (embedding_.dtype() == DType::F32) {
      std::memcpy(row, table + id * H * 4, static_cast<size_t>(H) * 4);
    } else if (embedding_.dtype() == DType::F16) {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(table) + id * H;
      for (int64_t i = 0; i < H; ++i) row[i] = f16_to_f32(src[i]);
    } else {
      QLM_CHECK(embedding_.dtype() == DType::BF16);
      const uint16_t* src = reinterpret_cast<const uint16_t*>(table) + id * H;
      for (int64_t i = 0; i < H; ++i) row[i] = bf16_to_f32(src[i]);
    }
  }
  return x;
}

void DecoderModel::attention_block(int64_t layer, Tensor& x, const Tensor& h, int64_t past,
                                   const ops::RopeAngles& angles) {
  Block& b = blocks_[static_cast<size_t>(layer)];
  const int64_t T = h.size(0), d = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor qkv = b.qkv->forward(h);
  const int64_t stride = qkv.size(1);
  QLM_CHECK(stride == (heads_ + 2 * kv_heads_) * d);
  float* q = qkv.data<float>();
  float* k = q + heads_ * d;
  float* v = k + kv_heads_ * d;
  if (config_.qk_norm)
    for (int64_t t = 0; t < T; ++t) {
      ops::rms_norm(q + t * stride, d, b.q_norm.data(), q + t * stride, d, heads_, d, eps);
      ops::rms_norm(k + t * stride, d, b.k_norm.data(), k + t * stride, d, kv_heads_, d, eps);
    }
  ops::apply_rope(angles, q, T, stride, heads_, d);
  ops::apply_rope(angles, k, T, stride, kv_heads_, d);
  cache_->write(layer, past, k, v, T, stride);

  Tensor attn = Tensor::empty({T, heads_ * d}, DType::F32);
  const ops::AttentionParams params{.heads = heads_, .kv_heads = kv_heads_, .head_dim = d,
                                    .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))),
                                    .sliding_window = config_.sliding_window[static_cast<size_t>(layer)]};
  ops::attention(q, stride, T, past, *cache_, layer, params, attn.data<float>(), heads_ * d);
  add_in_place(x, b.o->forward(attn));
}

void DecoderModel::mlp_block(Block& b, Tensor& x, const Tensor& h) {
  if (b.moe) {
    add_in_place(x, b.moe->forward(h));
    return;
  }
  Tensor gate_up = b.gate_up->forward(h);
  const int64_t T = h.size(0), width = gate_up.size(1) / 2;
  Tensor act = Tensor::empty({T, width}, DType::F32);
  ops::silu_and_mul(gate_up.data<float>(), act.data<float>(), T, width);
  add_in_place(x, b.down->forward(act));
}

Tensor DecoderModel::forward(std::span<const int32_t> tokens, std::span<const int64_t> positions, bool all_logits) {
  if (on_device()) return forward_device(tokens, positions, all_logits);
  const int64_t T = static_cast<int64_t>(tokens.size()), H = config_.hidden_size;
  const int64_t past = cache_->length();
  QLM_CHECK(T > 0 && positions.size() == tokens.size());
  for (int64_t t = 0; t < T; ++t) QLM_CHECK(positions[static_cast<size_t>(t)] == past + t);
  cache_->reserve(past + T);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const ops::RopeAngles angles = ops::rope_angles(config_.rope, positions);

  Tensor x = embed(tokens);
  Tensor h = Tensor::empty({T, H}, DType::F32);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    Block& b = blocks_[static_cast<size_t>(l)];
    ops::rms_norm(x.data<float>(), H, b.input_norm.data(), h.data<float>(), H, T, H, eps);
    attention_block(l, x, h, past, angles);
    ops::rms_norm(x.data<float>(), H, b.post_norm.data(), h.data<float>(), H, T, H, eps);
    mlp_block(b, x, h);
  }
  cache_->commit(T);

  const int64_t rows = all_logits ? T : 1;
  Tensor last = Tensor::empty({rows, H}, DType::F32);
  ops::rms_norm(x.data<float>() + (T - rows) * H, H, final_norm_.data(), last.data<float>(), H, rows, H, eps);
  Tensor logits = lm_head_->forward(last);
  if (gather_logits_) logits = options_.tp.comm->all_gather(logits, 1);
  return logits;
}

std::string DecoderModel::moe_router_status() const {
  if (options_.ctx.device.is_cpu()) return {};
  for (const Block& b : blocks_)
    if (b.moe) return b.moe->router_path(1);  // every MoE block is built alike
  return {};
}

}  // namespace qlm::models
