// A loaded model, ready to run: `Model::load(dir, options)` reads config.json, picks the
// architecture (models/architecture.h) and the quantization format, builds one DecoderModel per
// tensor-parallel rank (in-process ranks on CPU, each with its own layers and KV cache) and loads
// the checkpoint into every rank. `forward` appends tokens to the one sequence the model holds
// and returns logits.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"
#include "loader/loader.h"
#include "models/model_config.h"
#include "quant/kv_cache/kv_cache_method.h"
#include "runtime/ops/kv_cache.h"

namespace qlm::runtime {

struct ModelOptions {
  Device device = Device::cpu();
  int threads = 0;  // compute threads; 0 = every available core
  int tp = 1;       // tensor-parallel ranks (threads of this process on CPU)
  std::optional<std::string> quantization{};  // --quantization: a format name or alias to use instead
  KernelPolicy kernels{};                    // --linear-backend and per-format overrides
  std::vector<std::string> quant_plugins{};  // shared libraries registering more formats / kernels
  // --kv-cache-dtype: auto (the activation dtype; fp8_e4m3 for a compressed-tensors checkpoint
  // with a kv_cache_scheme), f32, f16, bf16, fp8_e4m3 or fp8_e5m2 (FORMATS.md §7).
  KVCacheDType kv_cache_dtype = KVCacheDType::Auto;
  // Activation dtype of the linear layers: F32 only on the CPU; on CUDA BF16 when unset, or F16 / F32.
  std::optional<DType> act_dtype{};
  // CUDA: single-token decode steps as one captured CUDA graph where the model allows it (not with
  // MoE layers yet); Model::decode_graph_status() says what ran.
  bool cuda_graph = true;
  ProgressCallback progress{};               // called by rank 0 while tensors load

  // Multi-process tensor parallelism on CUDA (one process per GPU, docs/architecture.md): with
  // tp_rank set, this process is rank *tp_rank of `tp`, builds and loads only that rank, then joins
  // the others through the rendezvous directory (parallel/rendezvous.h) and NCCL. The timeout bounds
  // the wait at the rendezvous, i.e. how much later than this one the slowest rank may finish loading.
  // Unset: every rank runs in this process.
  std::optional<int> tp_rank{};
  std::filesystem::path rendezvous{};
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(10)};
  std::function<void()> rendezvous_poll{};  // called while waiting for the other ranks; may throw
  // This rank's GPU; unset: cuda:((device.index + tp_rank) mod the number of visible GPUs).
  std::optional<int> tp_gpu{};
  // With tp_rank set: NCCL's set-up after the rendezvous, a forward step, token broadcast or
  // leave_group() still running after
  // stall_timeout makes on_stall(seconds) run, on a watchdog thread (parallel/stall_watchdog.h):
  // another rank has most likely died, and NCCL would wait for it for ever. Zero or no callback:
  // no watchdog.
  std::chrono::milliseconds stall_timeout{0};
  std::function<void(double seconds)> on_stall{};
};

// The GPU rank *options.tp_rank uses when `visible` GPUs are visible (see ModelOptions::tp_gpu).
// Throws "model.tp" when there is none to use.
Device tp_rank_device(const ModelOptions& options, size_t visible);

// The activation dtype a load with `options` uses (F32 on the CPU, BF16 by default on CUDA).
// Throws "model.act_dtype" for a dtype the device cannot run.
DType activation_dtype(const ModelOptions& options);

// What runs each linear layer, as decided at load time.
struct LayerPlan {
  std::string layer;   // "model.layers.0.self_attn.qkv_proj"
  std::string method;  // "gptq uint4b8 g32", "unquantized F16"
  std::string kernel;  // "cpu_fast_avx512"
  std::string format;  // the method's name: "gptq", "compressed-tensors:w8a8", "unquantized"
  int64_t K_p = 0, N_p = 0;  // this rank's input / output size
  std::vector<std::pair<std::string, std::string>> rejected;  // kernel, reason (priority order)
  std::string paths;  // the kernel's code paths by token count, where it has several (else empty)
};
// One fused mixture-of-experts layer: its MoE method and MoE kernel (the expert projections are
// LayerPlans of their own).
struct MoEPlan {
  std::string layer;   // "model.layers.0.block_sparse_moe"
  std::string method;  // the MoE method's description
  std::string kernel;  // "cpu_grouped", "cuda_grouped"
  int64_t experts = 0, top_k = 0, hidden = 0, intermediate_p = 0;  // this rank's intermediate size
  std::vector<std::pair<std::string, std::string>> rejected;      // kernel, reason (priority order)
};
struct LoadPlan {
  std::string quantization;  // the QuantizationConfig's description, or "none"
  std::vector<LayerPlan> layers;
  std::vector<MoEPlan> moe;  // in model order
  struct Group {
    std::string method, kernel;
    int count = 0;
  };
  // Layers counted by (method, kernel), in first-seen order.
  std::vector<Group> groups() const;
  // "gptq uint4b8 g32 → cpu_fast_avx512 ×14, unquantized F32 → cpu_fast_dense ×1", in first-seen order.
  std::string summary() const;
};

class Model {
 public:
  // Throws qlm::Error: config.*, model.unknown_architecture, checkpoint.*, loader.*, kernel.*,
  // device.unavailable (no such CUDA device, or a build without CUDA), device.capability (GPU too
  // old for the format), model.act_dtype, model.tp (TP size that does not fit, one GPU per rank
  // missing, NCCL missing, a tp_rank outside the group or without CUDA), comm.rendezvous / comm.nccl
  // (multi-process ranks that do not meet),
  // config.kv_cache_dtype (fp8_e5m2 with a checkpoint's own KV scales), kv_cache.* (bad scales).
  static std::unique_ptr<Model> load(const std::filesystem::path& model_dir, const ModelOptions& options = {});
  ~Model();

  const models::ModelConfig& config() const;
  int64_t vocab_size() const;
  const LoadPlan& plan() const { return plan_; }
  const LoadReport& load_report() const { return report_; }
  double load_seconds() const { return load_seconds_; }
  // The tensor-parallel size, and this process's rank in it: 0 when this process runs every rank,
  // ModelOptions::tp_rank when it runs one rank of a multi-process group.
  int tp() const;
  // How single-token decode steps ran on CUDA (rank 0): "graph (N nodes)", "eager: <why>", or ""
  // when none ran yet (and on the CPU).
  const std::string& decode_graph_status() const;
  // How a mixture-of-experts model's routers run in a single-token step on CUDA (rank 0): "folded into the MoE
  // routing kernel" or "its own linear layer (<why>)"; "" on the CPU and for models without experts.
  std::string moe_router_status() const;
  int tp_rank() const;
  // Whether this process holds one rank of a multi-process group (the others run elsewhere).
  bool joined_group() const;
  // Ends this process's part in a multi-process group: waits for its collectives, then destroys its
  // NCCL communicator — which NCCL returns from only once every rank of the group on this host
  // destroys its own, so every rank must call it (the destructor does, when no error unwinds).
  // A launcher that waits for its child ranks calls it first. forward() fails afterwards with
  // "model.tp". No-op for a model that runs all its ranks.
  void leave_group();
  // The token every rank continues with: rank 0's. Ranks of a multi-process group sample each on
  // their own; this broadcast keeps their sequences (and so their collectives) identical whatever
  // their sampling. Every rank must call it at the same step. Identity in a single process.
  int32_t agree_on_token(int32_t token);
  Device device() const { return device_; }
  DType act_dtype() const { return act_dtype_; }
  // The KV cache's storage, and one line on it: "KV cache f32", or for fp8 where its scales came
  // from ("KV cache fp8_e4m3: scales from the checkpoint for 0 of 2 attention layers, 2 defaulted to 1.0").
  ops::KvDType kv_cache_dtype() const { return kv_dtype_; }
  const std::string& kv_cache_report() const { return kv_report_; }
  // Bytes of every linear layer's checkpoint tensors (all ranks together), routed experts counted top_k of
  // num_experts: what a one-token decode step must read, for bandwidth floors.
  uint64_t linear_weight_bytes() const { return linear_weight_bytes_; }

  // Runs tokens at positions cache_length() .. cache_length() + T - 1 and keeps them in the KV cache.
  // Returns F32 logits [T, vocab] (all_logits) or [1, vocab] for the last token. Throws
  // "model.token" for ids outside the vocabulary and "model.positions" for other positions.
  Tensor forward(std::span<const int32_t> tokens, std::span<const int64_t> positions, bool all_logits = true);
  // The same with positions continuing the cache.
  Tensor forward(std::span<const int32_t> tokens, bool all_logits = true);
  // Greedy decoding with the host out of the loop, where this model can (a CUDA model run by one rank in this
  // process whose single-token steps are a CUDA graph): feeds `token` at the next position, then each step's greedy
  // choice — made on the device, the token runtime::argmax gives for the same logits — and calls on_token with each
  // choice until it returns false or max_steps steps ran; those steps stay in the sequence. A few steps are queued
  // ahead of the host, so the time between steps is the GPU's alone. Returns the steps kept, or nullopt where this
  // model cannot (nothing ran: step with forward() instead). Environment QLM_DECODE_AHEAD=0: always nullopt (the
  // host loop, for comparison). Throws "model.token" for an id outside the vocabulary.
  std::optional<int64_t> decode_greedy(int32_t token, int64_t max_steps, const std::function<bool(int32_t)>& on_token);
  int64_t cache_length() const;
  // Forgets the sequence (or keeps its first `length` tokens).
  void reset(int64_t length = 0);

 private:
  struct Impl;
  Model();
  std::unique_ptr<Impl> impl_;
  LoadPlan plan_;
  LoadReport report_;
  double load_seconds_ = 0;
  uint64_t linear_weight_bytes_ = 0;
  Device device_;
  DType act_dtype_ = DType::F32;
  ops::KvDType kv_dtype_ = ops::KvDType::F32;
  std::string kv_report_;
};

}  // namespace qlm::runtime
