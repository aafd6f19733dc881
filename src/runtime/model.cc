#include "runtime/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "config/hf_config.h"
#include "core/env_switch.h"
#include "config/quant_config_source.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "io/checkpoint.h"
#include "models/architecture.h"
#include "models/decoder_model.h"
#include "parallel/communicator.h"
#include "parallel/nccl_comm.h"
#include "parallel/rendezvous.h"
#include "parallel/stall_watchdog.h"
#include "quant/quantization_config.h"
#include "quant/unquantized.h"
#include "runtime/kv_cache_scales.h"
#include "runtime/model_plan.h"

namespace qlm::runtime {

struct Model::Impl {
  models::ModelConfig config;
  std::unique_ptr<QuantizationConfig> quant;
  std::unique_ptr<LocalCommGroup> group;  // tp > 1 on the CPU: in-process ranks
  std::vector<std::unique_ptr<Communicator>> gpu_comms;  // tp > 1 on CUDA: one NCCL rank per GPU
  std::vector<std::unique_ptr<models::DecoderModel>> ranks;  // the ranks this process runs
  int tp = 1;
  std::optional<int> joined_rank;  // set when this process is one rank of a multi-process group
  std::unique_ptr<StallWatchdog> watchdog;  // joined ranks with a stall timeout: guards every collective step
};

namespace {

using Clock = std::chrono::steady_clock;

// The communicator of a rank in a multi-process group, before and after it has met the others:
// layers keep this pointer from construction, and NCCL is attached once the rank has loaded and
// passed the rendezvous (nothing communicates before the first forward).
class JoinedComm final : public Communicator {
 public:
  JoinedComm(int rank, int size) : rank_(rank), size_(size) {}
  // Not left (an error is unwinding this rank): NCCL's destroy waits for every other rank on the
  // host, which may be gone or stuck in a collective, so the communicator is abandoned to the
  // process exit instead of hanging it.
  ~JoinedComm() override { (void)nccl_.release(); }
  void attach(std::unique_ptr<Communicator> nccl) { nccl_ = std::move(nccl); }
  // Finishes this rank's collectives (a barrier) and destroys its NCCL communicator, which returns
  // once every rank of the group on this host has done the same (Model::leave_group).
  void leave() {
    if (!nccl_) return;
    nccl_->barrier();
    nccl_.reset();
    left_ = true;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(Tensor& t) override { joined().all_reduce_sum(t); }
  Tensor all_gather(const Tensor& t, int dim) override { return joined().all_gather(t, dim); }
  void broadcast(Tensor& t, int root) override { joined().broadcast(t, root); }
  void barrier() override { joined().barrier(); }

 private:
  Communicator& joined() {
    if (left_)
      fail("model.tp", {}, "load the model again to run it",
           "tensor-parallel rank {} of {} has left its group (Model::leave_group) and cannot run collectives",
           rank_, size_);
    QLM_CHECK(nccl_ != nullptr);  // Model::load attaches NCCL before it returns
    return *nccl_;
  }
  int rank_, size_;
  bool left_ = false;
  std::unique_ptr<Communicator> nccl_;
};

uint64_t linear_bytes(const io::Checkpoint& checkpoint, models::DecoderModel& rank0) {
  uint64_t total = 0, routed = 0;
  const models::MoEConfig& moe = rank0.config().moe;
  for (const std::string& name : checkpoint.tensor_names()) {
    if (rank0.modules().is_ignored(name)) continue;
    if (const auto target = rank0.modules().resolve(name); target && target->layer) {
      // A routed expert's weights ("<block>.experts.<e>.") are read by the tokens routed to it: a one-token step
      // reads top_k of the num_experts in each layer.
      (moe.enabled() && name.find("." + moe.block + ".experts.") != std::string::npos ? routed : total) +=
          checkpoint.info(name).nbytes();
    }
  }
  if (routed > 0) total += routed / static_cast<uint64_t>(moe.num_experts) * static_cast<uint64_t>(moe.top_k);
  if (rank0.config().tie_word_embeddings && checkpoint.contains("model.embed_tokens.weight"))
    total += checkpoint.info("model.embed_tokens.weight").nbytes();
  return total;
}

// A CUDA device must exist; tensor parallelism on CUDA takes one GPU per rank (cuda:i .. cuda:i+tp-1)
// and NCCL.
void check_device(const ModelOptions& options, const std::filesystem::path& model_dir) {
  if (options.device.is_cpu()) return;
  const ErrorContext where{.file = model_dir.string(), .tensor = {}, .layer = {}};
  if (!cuda_backend_built())
    fail("device.unavailable", where, "rebuild qlm with the CUDA toolkit installed (QLM_CUDA=AUTO or ON), or use --device cpu",
         "{} was requested but this qlm was built without the CUDA backend", options.device.str());
  const size_t count = cuda_devices().size();
  if (options.device.index < 0 || static_cast<size_t>(options.device.index) >= count)
    fail("device.unavailable", where,
         count == 0 ? "check the driver and that a GPU is visible (nvidia-smi), or use --device cpu"
                    : fmt::format("use --device cuda:0 .. cuda:{}, or --device cpu", count - 1),
         "{} was requested but {} CUDA device(s) are visible", options.device.str(), count);
  if (options.tp == 1 || options.tp_rank) return;  // a joined rank's device: check_joined_rank
  if (!nccl_available())
    fail("model.tp", where, "use --tp 1 with --device cuda, or rebuild with NCCL installed",
         "tensor-parallel size {} on {} needs NCCL, which this qlm was built without", options.tp, options.device.str());
  if (static_cast<size_t>(options.device.index + options.tp) > count)
    fail("model.tp", where, fmt::format("use --tp {} or less on this machine, or --device cpu", count - options.device.index),
         "tensor-parallel size {} on CUDA needs one GPU per rank (cuda:{} .. cuda:{}) but {} CUDA device(s) are visible",
         options.tp, options.device.index, options.device.index + options.tp - 1, count);
}

// One rank of a multi-process group: CUDA, NCCL, a rank inside the group, a rendezvous; returns
// the rank's GPU.
Device check_joined_rank(const ModelOptions& options, const std::filesystem::path& model_dir) {
  const ErrorContext where{.file = model_dir.string(), .tensor = {}, .layer = {}};
  const int rank = *options.tp_rank;
  if (options.tp < 2)
    fail("model.tp", where, "pass --tp N (N >= 2) with --tp-rank, or leave --tp-rank out",
         "tensor-parallel rank {} was given but the tensor-parallel size is {}", rank, options.tp);
  if (rank < 0 || rank >= options.tp)
    fail("model.tp", where, fmt::format("use a rank in 0 .. {}", options.tp - 1),
         "tensor-parallel rank {} is outside the group of {} ranks", rank, options.tp);
  if (options.device.is_cpu())
    fail("model.tp", where, "use --device cuda (one process per GPU); on the CPU --tp N runs its ranks as threads",
         "multi-process tensor parallelism (rank {} of {}) needs CUDA and NCCL, but the device is cpu", rank,
         options.tp);
  if (options.rendezvous.empty())
    fail("model.tp", where, "pass the same --rendezvous DIR to every rank",
         "tensor-parallel rank {} of {} has no rendezvous to meet the other ranks", rank, options.tp);
  check_rendezvous_address(options.rendezvous.string());
  if (!cuda_backend_built())
    fail("device.unavailable", where, "rebuild qlm with the CUDA toolkit installed (QLM_CUDA=AUTO or ON)",
         "tensor-parallel rank {} of {} needs CUDA but this qlm was built without the CUDA backend", rank, options.tp);
  if (!nccl_available())
    fail("model.tp", where, "rebuild with NCCL installed",
         "tensor-parallel rank {} of {} needs NCCL, which this qlm was built without", rank, options.tp);
  return tp_rank_device(options, cuda_devices().size());
}

// The format must run on this GPU generation and with these activations.
void check_quant_on_device(const QuantizationConfig& quant, Device device, int capability, DType act_dtype) {
  if (device.is_cpu()) return;
  if (capability < quant.min_capability())
    fail("device.capability", {}, "use a newer GPU, or --device cpu",
         "quantization '{}' needs CUDA compute capability {} or newer; {} has {}", quant.name(), quant.min_capability(),
         device.str(), capability);
  const std::vector<DType> supported = quant.supported_act_dtypes();
  if (std::find(supported.begin(), supported.end(), act_dtype) == supported.end()) {
    std::string names;
    for (DType d : supported) names += fmt::format("{}{}", names.empty() ? "" : ", ", dtype_name(d));
    fail("model.act_dtype", {}, fmt::format("choose --dtype among {}", names),
         "quantization '{}' does not run with {} activations", quant.name(), dtype_name(act_dtype));
  }
}

}  // namespace

Device tp_rank_device(const ModelOptions& options, size_t visible) {
  QLM_CHECK(options.tp_rank.has_value());
  const int rank = *options.tp_rank;
  if (visible == 0)
    fail("device.unavailable", {}, "check the driver and that a GPU is visible (nvidia-smi)",
         "tensor-parallel rank {} needs a GPU but no CUDA device is visible", rank);
  if (options.tp_gpu) {
    if (*options.tp_gpu < 0 || static_cast<size_t>(*options.tp_gpu) >= visible)
      fail("model.tp", {}, fmt::format("use --tp-gpu 0 .. {}", visible - 1),
           "tensor-parallel rank {} was given GPU cuda:{} but {} CUDA device(s) are visible", rank, *options.tp_gpu,
           visible);
    return Device::cuda(*options.tp_gpu);
  }
  const int base = options.device.is_cpu() ? 0 : options.device.index;
  return Device::cuda(static_cast<int>((static_cast<size_t>(base) + static_cast<size_t>(rank)) % visible));
}

DType activation_dtype(const ModelOptions& options) {
  if (options.device.is_cpu()) {
    if (options.act_dtype && *options.act_dtype != DType::F32)
      fail("model.act_dtype", {}, "leave --dtype unset (or f32) on the CPU, or use --device cuda for bf16 / f16",
           "activations on the CPU are F32; {} was requested", dtype_name(*options.act_dtype));
    return DType::F32;
  }
  const DType d = options.act_dtype.value_or(DType::BF16);
  if (d != DType::F32 && d != DType::F16 && d != DType::BF16)
    fail("model.act_dtype", {}, "use bf16, f16 or f32", "activations on {} must be BF16, F16 or F32, not {}",
         options.device.str(), dtype_name(d));
  return d;
}

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() {
  // A joined rank that was not told to leave leaves now, unless an error is unwinding it: then its
  // peers may never reach NCCL's destroy, and the communicator is abandoned (JoinedComm).
  if (!impl_->joined_rank || std::uncaught_exceptions() > 0) return;
  try {
    leave_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qlm: warning: tensor-parallel rank %d could not leave its group: %s\n", tp_rank(), e.what());
  }
}

void Model::leave_group() {
  if (!impl_->joined_rank) return;
  for (auto& rank : impl_->ranks) rank->release_decode_graph();  // before NCCL's destroy (decoder_model.h)
  const StallWatchdog::Guard guard(impl_->watchdog.get());
  static_cast<JoinedComm&>(*impl_->gpu_comms.front()).leave();
}

std::unique_ptr<Model> Model::load(const std::filesystem::path& model_dir, const ModelOptions& options) {
  const auto start = Clock::now();
  if (options.tp < 1 || options.tp > 64)
    fail("model.tp", {}, "use a tensor-parallel size of at least 1", "tensor-parallel size {} is invalid", options.tp);
  const std::optional<int> joined = options.tp_rank;
  const Device joined_device = joined ? check_joined_rank(options, model_dir) : options.device;
  check_device(options, model_dir);
  const DType act_dtype = activation_dtype(options);
  set_compute_threads(options.threads);
  load_plugins_from_env();
  for (const std::string& plugin : options.quant_plugins) load_quant_plugin(plugin);

  std::unique_ptr<Model> model(new Model());
  Impl& m = *model->impl_;
  const config::HfConfig hf = config::HfConfig::load(model_dir);
  m.config = models::configure_model(hf);
  const std::optional<config::QuantConfigSource> source = config::find_quant_config(model_dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(model_dir);
  config::check_quantized_tensors_have_config(source, checkpoint.tensor_names(), model_dir);
  m.quant = resolve_quantization_config(source ? std::optional<io::JsonView>(source->config) : std::nullopt,
                                        options.quantization);

  const int tp = options.tp;
  const models::ModelConfig& c = m.config;
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"num_attention_heads", c.num_heads},
                                {"intermediate_size", c.intermediate_size}})
    if (n % tp != 0)
      fail("model.tp", {.file = hf.raw.source(), .tensor = {}, .layer = {}},
           "choose a tensor-parallel size that divides it", "{} = {} is not divisible by the tensor-parallel size {}",
           what, n, tp);
  m.tp = tp;
  m.joined_rank = joined;
  // The ranks this process runs: all of them, or the one it joined as.
  const int local_ranks = joined ? 1 : tp;
  auto global_rank = [&](int i) { return joined ? *joined : i; };
  auto rank_device = [&](int r) {
    if (joined) return joined_device;
    return options.device.is_cpu() ? options.device : Device::cuda(options.device.index + r);
  };
  const Device first_device = rank_device(global_rank(0));
  const int capability = first_device.is_cpu() ? 0 : cuda_capability(first_device.index);
  if (m.quant) check_quant_on_device(*m.quant, first_device, capability, act_dtype);
  if (tp > 1 && options.device.is_cpu()) m.group = std::make_unique<LocalCommGroup>(tp);
  JoinedComm* joined_comm = nullptr;
  if (joined) {
    // NCCL comes after the load (below); the layers hold this forwarding communicator until then.
    auto comm = std::make_unique<JoinedComm>(*joined, tp);
    joined_comm = comm.get();
    m.gpu_comms.push_back(std::move(comm));
  } else if (tp > 1 && !options.device.is_cpu()) {
    // Every rank joins the NCCL group at once (ncclCommInitRank waits for all of them).
    const NcclId id = make_nccl_id();
    m.gpu_comms.resize(static_cast<size_t>(tp));
    run_on_ranks(tp, [&](int r) {
      m.gpu_comms[static_cast<size_t>(r)] = make_nccl_communicator(id, r, tp, rank_device(r).index);
    });
  }
  auto tp_context = [&](int r) -> TpContext {
    if (tp == 1) return {};
    if (m.group) return m.group->context(r);
    if (joined) return {.rank = r, .size = tp, .comm = m.gpu_comms.front().get()};
    return {.rank = r, .size = tp, .comm = m.gpu_comms[static_cast<size_t>(r)].get()};
  };
  // The kernels hold their own (repacked) copies: the checkpoint-layout parameters are freed once
  // each layer is finalized. Nothing in the runtime reads them afterwards.
  const QuantContext ctx{.device = first_device, .capability = capability, .act_dtype = act_dtype,
                         .kernels = options.kernels, .release_checkpoint_tensors = true};
  const models::TensorDtypeLookup dtypes = models::checkpoint_dtypes(checkpoint);
  // KV cache: the storage the user chose (auto: the activation dtype, or fp8 for a compressed-tensors
  // kv_cache_scheme); the format's KV-cache methods register the checkpoint's k/v scales with each
  // rank's modules, and after loading hand them to the rank's cache (kv_cache_scales.h).
  const KVCacheDType kv_choice = resolve_kv_cache_dtype(options.kv_cache_dtype, m.quant.get());
  check_kv_cache_dtype(kv_choice, m.quant.get());
  const ops::KvDType kv_storage = kv_storage_dtype(kv_choice, act_dtype);
  for (int i = 0; i < local_ranks; ++i) {
    const int r = global_rank(i);
    QuantContext rank_ctx = ctx;
    rank_ctx.device = rank_device(r);
    if (!rank_ctx.device.is_cpu()) rank_ctx.capability = cuda_capability(rank_ctx.device.index);
    const models::RankOptions rank{.quant = m.quant.get(), .ctx = rank_ctx, .tp = tp_context(r),
                                   .kv = {.dtype = kv_storage}, .cuda_graph = options.cuda_graph};
    m.ranks.push_back(std::make_unique<models::DecoderModel>(m.config, rank, dtypes));
  }
  const ScaleShapeLookup shape_of = [&checkpoint](const std::string& name) -> std::optional<Shape> {
    if (!checkpoint.contains(name)) return std::nullopt;
    return checkpoint.info(name).shape;
  };
  std::vector<KvCacheMethods> kv_methods;  // per rank: the checkpoint's k/v scales
  for (auto& rank : m.ranks)
    kv_methods.push_back(attach_kv_cache_methods(*rank, m.quant.get(), ctx,
                                                 kv_cache_dtype_is_fp8(kv_choice) ? kv_choice
                                                                                  : KVCacheDType::Auto,
                                                 shape_of));
  model->plan_ = build_load_plan(*m.ranks.front(), m.quant.get());
  model->linear_weight_bytes_ = linear_bytes(checkpoint, *m.ranks.front());

  // Each rank reads only what it keeps: tensors come from the memory-mapped checkpoint and the
  // parameters copy out this rank's slice, so a rank's reads are the pages of its slices (plus the
  // replicated tensors) — docs/architecture.md, "Tensor parallelism".
  std::vector<LoadReport> reports(static_cast<size_t>(local_ranks));
  run_on_ranks(local_ranks, [&](int i) {
    reports[static_cast<size_t>(i)] =
        m.ranks[static_cast<size_t>(i)]->load(checkpoint, global_rank(i) == 0 ? options.progress : ProgressCallback{});
  });
  for (size_t r = 0; r < kv_methods.size(); ++r) finish_kv_cache_methods(kv_methods[r], *m.ranks[r]);
  if (joined_comm) {
    // The other ranks are other processes. Meeting them only now means that whatever fails while
    // declaring or loading a rank (kernels, memory, the checkpoint) fails before any rank waits in
    // NCCL, which has no time limit: the others then stop at the rendezvous' timeout with a message.
    const RendezvousOptions meet{.dir = options.rendezvous, .rank = *joined, .size = tp,
                                 .timeout = options.rendezvous_timeout, .poll = options.rendezvous_poll};
    const NcclId id = rendezvous(meet, [] { return make_nccl_id(); });
    // From here a rank that dies leaves the others waiting in NCCL without a time limit (its init
    // included): the watchdog bounds every step (ModelOptions::stall_timeout).
    if (options.stall_timeout.count() > 0 && options.on_stall)
      m.watchdog = std::make_unique<StallWatchdog>(options.stall_timeout, options.on_stall);
    const StallWatchdog::Guard guard(m.watchdog.get());
    joined_comm->attach(make_nccl_communicator(id, *joined, tp, joined_device.index));
  }
  model->kv_dtype_ = kv_storage;
  model->kv_report_ = ops::kv_dtype_is_fp8(kv_storage)
                          ? runtime::kv_cache_report(kv_methods.front())
                          : fmt::format("KV cache {}{}", ops::kv_dtype_name(kv_storage),
                                        options.kv_cache_dtype == KVCacheDType::Auto ? " (auto: the activation dtype)" : "");
  model->report_ = reports.front();
  model->device_ = first_device;
  model->act_dtype_ = act_dtype;
  model->load_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  return model;
}

const models::ModelConfig& Model::config() const { return impl_->config; }
int64_t Model::vocab_size() const { return impl_->config.vocab_size; }
int Model::tp() const { return impl_->tp; }
const std::string& Model::decode_graph_status() const { return impl_->ranks.front()->decode_graph_status(); }
std::string Model::moe_router_status() const { return impl_->ranks.front()->moe_router_status(); }
int Model::tp_rank() const { return impl_->joined_rank.value_or(0); }
bool Model::joined_group() const { return impl_->joined_rank.has_value(); }

int32_t Model::agree_on_token(int32_t token) {
  if (!impl_->joined_rank) return token;  // one process: rank 0's sampler is the only one
  const StallWatchdog::Guard guard(impl_->watchdog.get());
  Tensor t = Tensor::from_vector(std::vector<int32_t>{token}, {1}).to_device(device_);
  impl_->gpu_comms.front()->broadcast(t, 0);
  return t.to_device(Device::cpu()).data<int32_t>()[0];
}
int64_t Model::cache_length() const { return impl_->ranks.front()->cache_length(); }

std::optional<int64_t> Model::decode_greedy(int32_t token, int64_t max_steps,
                                            const std::function<bool(int32_t)>& on_token) {
  static const bool ahead = env_switch_on("QLM_DECODE_AHEAD");
  if (token < 0 || token >= vocab_size())
    fail("model.token", {}, fmt::format("token ids must be in [0, {})", vocab_size()),
         "token id {} is outside the vocabulary of {} ids", token, vocab_size());
  if (!ahead || impl_->ranks.size() != 1 || impl_->joined_rank) return std::nullopt;
  const StallWatchdog::Guard guard(impl_->watchdog.get());
  return impl_->ranks.front()->decode_greedy(token, max_steps, on_token);
}

void Model::reset(int64_t length) {
  if (length < 0 || length > cache_length())
    fail("model.positions", {}, "", "cannot keep {} tokens of a sequence of {}", length, cache_length());
  for (auto& rank : impl_->ranks) rank->truncate_cache(length);
}

Tensor Model::forward(std::span<const int32_t> tokens, bool all_logits) {
  std::vector<int64_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = cache_length() + static_cast<int64_t>(i);
  return forward(tokens, positions, all_logits);
}

Tensor Model::forward(std::span<const int32_t> tokens, std::span<const int64_t> positions, bool all_logits) {
  const StallWatchdog::Guard guard(impl_->watchdog.get());  // joined ranks: a dead peer must not hang us
  if (tokens.empty()) fail("model.token", {}, "pass at least one token", "forward() needs at least one token");
  if (positions.size() != tokens.size())
    fail("model.positions", {}, "", "{} tokens but {} positions", tokens.size(), positions.size());
  const int64_t vocab = vocab_size(), past = cache_length();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail("model.token", {}, fmt::format("token ids must be in [0, {})", vocab),
           "token id {} at index {} is outside the vocabulary of {} ids", tokens[i], i, vocab);
    if (positions[i] != past + static_cast<int64_t>(i))
      fail("model.positions", {}, "continue the sequence (or reset() the model)",
           "position {} at index {}: the sequence holds {} tokens, so the next position is {}", positions[i], i, past,
           past + static_cast<int64_t>(i));
  }
  const int local_ranks = static_cast<int>(impl_->ranks.size());
  if (local_ranks == 1) return impl_->ranks.front()->forward(tokens, positions, all_logits);
  std::vector<Tensor> out(static_cast<size_t>(local_ranks));
  run_on_ranks(local_ranks, [&](int r) {
    out[static_cast<size_t>(r)] = impl_->ranks[static_cast<size_t>(r)]->forward(tokens, positions, all_logits);
  });
  return out.front();
}

}  // namespace qlm::runtime
