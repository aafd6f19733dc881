// Layer 1 and 2 of the quantization system (shared/ARCHITECTURE.md): a QuantizationConfig per
// checkpoint format gives every layer a QuantizeMethod. A layer never knows which format it holds;
// a format never knows which kernel will run it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/json.h"
#include "kernels/kernel_registry.h"

namespace qlm {

class LinearLayer;

// What a config needs to know about a layer to choose its method.
struct LayerInfo {
  enum class Kind : uint8_t { Linear, LmHead, Embedding, MoE, Attention } kind = Kind::Linear;
  std::string prefix;  // full module name, e.g. "model.layers.0.self_attn.qkv_proj"
  // For fused layers, the checkpoint prefixes of the parts ("...q_proj", "...k_proj", "...v_proj");
  // empty for unfused layers. Ignore lists are matched against these (checkpoint names).
  std::vector<std::string> shard_prefixes;
  bool row_parallel = false;  // K is split across ranks
};

// Everything the methods need from the environment at load time.
struct QuantContext {
  Device device;
  int capability = 0;  // CUDA compute capability, 0 on CPU
  DType act_dtype = DType::F32;  // F32 on CPU; F32, F16 or BF16 on CUDA
  KernelPolicy kernels;
  // Free each layer's checkpoint-layout parameters once its kernel has prepared its own layout
  // (Model::load sets it; tests that inspect parameters after loading leave it off).
  bool release_checkpoint_tensors = false;
};

class LinearMethod {
 public:
  virtual ~LinearMethod() = default;
  virtual std::string name() const = 0;  // "gptq", "awq", "compressed-tensors:wna16", "unquantized"
  // Declares the parameters in the checkpoint's layout on `layer` (layer.add_param) and chooses the
  // kernel (recorded in layer.kernel_selection) — no weight bytes are needed for either.
  // K_p: this rank's input size; output_partition_sizes: this rank's size of each fused part.
  virtual void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes,
                              int64_t K, int64_t N, DType params_dtype) = 0;
  // Runs once after every tensor arrived: validates values, converts to the kernel's layout.
  virtual void process_weights_after_loading(LinearLayer& layer) = 0;
  // y = x · W (+ bias). x: [M, K_p] contiguous on the layer's device: F32 on the host, the
  // context's act_dtype on CUDA; bias (may be null): F32 [N_p] on the same device. y: [M, N_p],
  // x's dtype and device (allocate_linear_output).
  virtual Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) = 0;
  // One line for plans and summaries: "uint4b8 g128 act-order".
  virtual std::string describe() const = 0;
  // Online quantization (vLLM's uses_meta_device): the loader finalizes the layer as soon as its
  // last tensor arrived, so its float weights are quantized and released before the next layer's.
  virtual bool uses_meta_device() const { return false; }
  // An unquantized layer's prepared weight (DenseLinearKernel::device_weight), null for every other method.
  virtual const Tensor* dense_device_weight() const { return nullptr; }
};

// Fused mixture-of-experts (layers/fused_moe.h, FORMATS.md §8). The default of every config is the
// expertwise method (quant/moe_method.h): each expert's w13 (gate|up) and w2 (down) get their linear
// method from get_linear_method on the expert's checkpoint names, so ignore lists and per-module
// overrides apply to experts exactly as to linear layers. A config overrides get_moe_method to
// refuse (at config time, naming the field) what it cannot serve.
class FusedMoE;
struct MoERouting;
class MoEMethod {
 public:
  virtual ~MoEMethod() = default;
  virtual std::string name() const = 0;
  // Declares every local expert's parameters in the checkpoint's layout (loaded by expert id and
  // shard id) on `layer` and chooses the MoE kernel; no weight bytes are needed for either.
  virtual void create_weights(FusedMoE& layer) = 0;
  // Runs once every expert's tensors arrived and its projections are finalized.
  virtual void process_weights_after_loading(FusedMoE& layer) = 0;
  // This rank's partial output [T, H] (before the tensor-parallel reduction) for x [T, H] (F32 host).
  virtual Tensor apply(FusedMoE& layer, const Tensor& x, const MoERouting& routing) = 0;
  // The same on a device: x [T, H] in the act dtype and router logits [T, E] on the layer's device;
  // routes there and returns the partial output F32 [T, H] on the device. Default: refused.
  virtual Tensor apply_device(FusedMoE& layer, const Tensor& x, const Tensor& router_logits);
  // The same from the router's weight [E, H] (act dtype, same device) where router_fold_obstacle(T) is empty: the
  // kernel multiplies the router inside its routing (MoEKernel::run_device_router). Default: never; refused.
  virtual std::string router_fold_obstacle(int64_t tokens) const;
  virtual Tensor apply_device_router(FusedMoE& layer, const Tensor& x, const Tensor& router_weight);
  // Why apply_device on `tokens` tokens waits for the host (reads device results there), which
  // keeps it out of a captured CUDA graph; empty when it only enqueues device work. Default: waits.
  virtual std::string device_host_wait(int64_t tokens) const;
  virtual std::string describe() const = 0;
};
// Later issues implement this; declared here so configs can answer for every layer kind.
class KVCacheMethod {
 public:
  virtual ~KVCacheMethod() = default;
  virtual std::string name() const = 0;
};

class QuantizationConfig {
 public:
  virtual ~QuantizationConfig() = default;
  virtual std::string name() const = 0;  // canonical registry name
  virtual std::vector<DType> supported_act_dtypes() const = 0;
  virtual int min_capability() const = 0;  // CUDA capability; CPU is always allowed
  // The method for one layer: a quantized method, or the unquantized one for skipped layers.
  // Throws (naming the layer) when the layer cannot be served.
  virtual std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo& layer, const QuantContext& ctx) const = 0;
  virtual std::unique_ptr<MoEMethod> get_moe_method(const LayerInfo& layer, const QuantContext& ctx) const;
  virtual std::unique_ptr<KVCacheMethod> get_kv_cache_method(const LayerInfo& layer, const QuantContext& ctx) const;
  // Human summary of the numerics: "gptq 4-bit g128 sym desc_act=false v1".
  virtual std::string describe() const = 0;
  // Ignore-list entries (any spelling) that matched no layer, for warnings after the model is built.
  virtual std::vector<std::string> unmatched_ignore_patterns() const { return {}; }
};

// Registry entry of a format. A format registers itself in its own source file.
struct QuantFormat {
  std::string name;                  // canonical: "gptq", "awq", "compressed-tensors", "fp8", ...
  std::vector<std::string> aliases;  // "gptq_marlin", "auto_gptq", ...
  // Formats a user override may switch between (FORMATS.md §2.1, RELIABILITY.md C2); a format's
  // own name and aliases are always in its family.
  std::string family;
  std::vector<std::string> config_filenames;  // fallback files, e.g. "quantize_config.json"
  // Builds the config from the quantization_config object; throws "config.*" errors naming fields.
  std::function<std::unique_ptr<QuantizationConfig>(const io::JsonView&)> from_config;
};

class QuantRegistry {
 public:
  static QuantRegistry& instance();
  // Adds a format; a name or alias that exists already is overridden with a warning on stderr
  // (how plugins replace built-ins).
  void add(QuantFormat format);
  const QuantFormat* find(const std::string& name_or_alias) const;  // nullptr if unknown
  std::vector<std::string> names() const;                            // canonical names, sorted
  std::vector<std::string> warnings() const;

 private:
  std::vector<QuantFormat> formats_;
  std::vector<std::string> warnings_;
};

struct QuantFormatRegistrar {
  explicit QuantFormatRegistrar(QuantFormat format) { QuantRegistry::instance().add(std::move(format)); }
};

// FORMATS.md §2.1: the checkpoint's quant_method (or the format named by `user_override`, e.g.
// `--quantization gptq_marlin`) resolved through names and aliases. A user override that leaves
// the checkpoint's family is an error naming both. Returns null when the checkpoint is not quantized
// and there is no override.
std::unique_ptr<QuantizationConfig> resolve_quantization_config(const std::optional<io::JsonView>& quant_config,
                                                                const std::optional<std::string>& user_override);

// Loads a plugin shared library that registers formats (or kernels) from its static initialisers
// or from an exported `extern "C" void qlm_register_plugin()`. Errors name the path and dlerror().
void load_quant_plugin(const std::string& path);
// Loads every plugin listed in QLM_QUANT_PLUGINS (':'-separated paths), once.
void load_plugins_from_env();

}  // namespace qlm
