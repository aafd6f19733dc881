// The Llama-family decoder on one tensor-parallel rank: token embedding, N blocks of
// (RMSNorm → QKV → [q/k norm] → rotary → GQA attention over the KV cache → o_proj) and
// (RMSNorm → gate_up → SiLU·mul → down), final RMSNorm and lm_head. Every projection is a parallel
// LinearLayer built with the model's QuantizationConfig, so any format and any TP size run here;
// row-parallel layers all-reduce, a column-parallel lm_head all-gathers. On the CPU activations are
// F32; on CUDA (ctx.device, decoder_model_cuda.cc) the whole step stays on the device: the residual
// stream is F32, linear layers take and return ctx.act_dtype, and only the logits come back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/graph.h"
#include "io/checkpoint.h"
#include "loader/loader.h"
#include "loader/module_set.h"
#include "models/checkpoint_dtype.h"
#include "models/model_config.h"
#include "models/moe_block.h"
#include "runtime/ops/cuda/device_kv_cache.h"
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/kv_cache.h"

namespace qlm::models {

// The dtype of a checkpoint tensor by name (nullopt when absent; checkpoint_dtype.h): decides the dtype of dense
// parameters so that they match what the checkpoint stores.
TensorDtypeLookup checkpoint_dtypes(const io::Checkpoint& checkpoint);

struct RankOptions {
  const QuantizationConfig* quant = nullptr;  // null: unquantized
  QuantContext ctx;
  TpContext tp;
  ops::KvEncoding kv;
  // CUDA: run single-token decode steps as one captured CUDA graph (decoder_model_cuda.cc) where
  // the model allows it; false: every kernel launched one by one.
  bool cuda_graph = true;
};

class DecoderModel {
 public:
  // Declares every layer (the methods choose their kernels here) and dense tensor of this rank.
  DecoderModel(ModelConfig config, const RankOptions& options, const TensorDtypeLookup& dtypes);
  DecoderModel(const DecoderModel&) = delete;
  DecoderModel& operator=(const DecoderModel&) = delete;

  const ModelConfig& config() const { return config_; }
  ModuleSet& modules() { return modules_; }
  // The output projection (also when tied to the embedding, where it is not in modules()).
  LinearLayer& lm_head() { return *lm_head_; }

  // Loads and finalizes every parameter (completeness-checked), then prepares norms and a tied lm_head.
  LoadReport load(const io::Checkpoint& checkpoint, const ProgressCallback& progress = {});
  LoadReport load(const std::vector<std::pair<std::string, Tensor>>& tensors);

  // Runs `tokens` at `positions` (positions[i] == cache length + i) and appends them to the KV
  // cache. Returns F32 logits [T, vocab] (all_logits) or [1, vocab] for the last token, on the
  // host also for a device model. Every rank of a TP group must call it with the same arguments.
  Tensor forward(std::span<const int32_t> tokens, std::span<const int64_t> positions, bool all_logits);
  // Greedy single-token steps on the device with the host out of the loop: feeds `token` at the next position, then
  // each step's greedy choice (made on the device: the first index of the largest logit, NaN never, as
  // runtime::argmax), and calls on_token with each choice in order until it returns false or max_steps steps ran;
  // the steps run stay in the KV cache. Up to kDecodeAhead steps are queued ahead of the host: those past the last
  // choice on_token accepts run but are not kept. Returns the steps kept, or nullopt (nothing run) where single-token
  // steps cannot run as a CUDA graph here (a CPU model, eager steps: decode_graph_status says why).
  std::optional<int64_t> decode_greedy(int32_t token, int64_t max_steps, const std::function<bool(int32_t)>& on_token);
  static constexpr int kDecodeAhead = 4;

  // Tokens held in the KV cache (host or device), and forgetting all but the first `length`.
  int64_t cache_length() const;
  // The fused MoE layers, in model order (empty for dense models).
  std::vector<const FusedMoE*> moe_layers() const;
  void truncate_cache(int64_t length);
  // This rank's kv heads: kv_heads() of them, starting at head first_kv_head() of the model.
  int64_t kv_heads() const { return kv_heads_; }
  int64_t first_kv_head() const;
  // Scales of the KV cache (host or device) for `layer`, one per kv head of this rank; before
  // anything is cached.
  void set_kv_cache_scales(int64_t layer, std::span<const float> k_scales, std::span<const float> v_scales);
  // How single-token decode steps run on CUDA: "graph (N nodes)", "eager: <why not a graph>", or
  // "" before the first one (and on the CPU).
  const std::string& decode_graph_status() const { return decode_graph_status_; }
  // How a mixture-of-experts model's routers run in a single-token step on CUDA (MoEBlock::router_path); "" on the
  // CPU and for models without experts.
  std::string moe_router_status() const;
  // Destroys the captured decode graph (the next single-token step captures again). A rank leaving
  // its NCCL group does this first: NCCL's communicator cannot be destroyed while a graph holds its
  // captured collectives.
  void release_decode_graph() { decode_graph_.reset(); }
  // The host KV cache of a CPU model.
  ops::KvCache& cache() {
    QLM_CHECK(cache_ != nullptr);
    return *cache_;
  }

 private:
  struct Block {
    LinearLayer* qkv = nullptr;
    LinearLayer* o = nullptr;
    LinearLayer* gate_up = nullptr;
    LinearLayer* down = nullptr;
    std::unique_ptr<MoEBlock> moe;  // routed experts instead of gate_up/down (ModelConfig::moe)
    std::vector<float> input_norm, post_norm, q_norm, k_norm;
  };
  void declare(const TensorDtypeLookup& dtypes);
  void finish_load();
  Tensor embed(std::span<const int32_t> tokens) const;
  void attention_block(int64_t layer, Tensor& x, const Tensor& h, int64_t past, const ops::RopeAngles& angles);
  void mlp_block(Block& block, Tensor& x, const Tensor& h);

  ModelConfig config_;
  RankOptions options_;
  ModuleSet modules_;
  std::vector<Block> blocks_;
  std::unique_ptr<LinearLayer> tied_lm_head_;
  LinearLayer* lm_head_ = nullptr;
  bool gather_logits_ = false;
  Tensor embedding_;  // [vocab, hidden], checkpoint dtype
  std::vector<float> final_norm_;
  int64_t heads_ = 0, kv_heads_ = 0;  // this rank
  std::unique_ptr<ops::KvCache> cache_;  // CPU; sized once the layers know this rank's kv heads

  // The device path (decoder_model_cuda.cc). Weights other than the linear layers' (which their
  // kernels hold) live here as device tensors: embedding in its checkpoint dtype, norms in F32.
  bool on_device() const { return !options_.ctx.device.is_cpu(); }
  void finish_load_device();
  Tensor forward_device(std::span<const int32_t> tokens, std::span<const int64_t> positions, bool all_logits);
  // The layers, final norm and lm_head over the F32 embeddings x [T, hidden] of slots past..;
  // returns F32 logits on the device (all T rows, or the last). past_slot: a device int holding
  // `past`, read by the kernels instead (the CUDA graph's decode step).
  Tensor run_device_layers(Tensor x, int64_t past, const ops::cu::DeviceRope& rope, bool all_logits,
                           const int32_t* past_slot);
  // One token through the captured decode graph (captured, or re-captured after the KV cache
  // moved, first); nullopt when the step cannot run as a graph (then decode_graph_status_ says why).
  std::optional<Tensor> decode_with_graph(int32_t token, int64_t position);
  // Why single-token steps of this model cannot be a CUDA graph ("" when they can).
  std::string decode_graph_obstacle() const;
  // The captured step: reads its token, slot and angles from `inputs` (written by the host before a replay, or by
  // the previous replay's last kernel, which chooses the greedy token and moves to the next slot: decode_greedy).
  struct DecodeGraph {
    std::unique_ptr<cuda::CapturedGraph> graph;
    uint64_t cache_generation = 0;     // DeviceKvCache::generation() at capture
    ops::cu::DecodeStepInputs inputs;  // the token id, its slot and the slot's rotary angles
    Tensor rope_table;                 // F32 [cache capacity, 2·half]: every slot's angles, for decode_advance
    Tensor logits;                     // F32 [1, vocab] on the device, written by each replay
  };
  // The decode graph for the cache as it is (captured, or re-captured after the KV cache moved); null when steps
  // cannot run as a graph (then decode_graph_status_ says why). position: the next step's, for the capture.
  DecodeGraph* decode_graph(int64_t position);
  std::unique_ptr<DecodeGraph> decode_graph_;
  std::string decode_graph_status_;
  bool decode_eager_ = false;  // decided for good: single-token steps run eagerly (status says why)
  bool device_warm_ = false;  // an eager forward ran (kernels' lazily made state exists)
  struct DeviceNorms {
    Tensor input_norm, post_norm, q_norm, k_norm;
  };
  // The widening, head norms, rotary and cache write of one layer as separate kernels (what
  // ops::cu::prepare_attention does in one, QLM_PREPARE_ATTENTION=0); returns the F32 qkv rows, whose q
  // columns attention reads.
  Tensor prepare_attention_separately(const Tensor& qkv_out, const DeviceNorms& norms, float eps,
                                      const ops::cu::DeviceRope& rope, int64_t layer, int64_t past,
                                      const int32_t* past_slot);
  Tensor device_embedding_, device_final_norm_;
  std::vector<DeviceNorms> device_norms_;
  std::unique_ptr<ops::cu::DeviceKvCache> device_cache_;  // CUDA
};

}  // namespace qlm::models
