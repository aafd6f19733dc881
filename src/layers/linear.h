// Parallel linear layers (FORMATS.md §4.2). A layer owns its parameters (declared by its method),
// knows how checkpoint tensors map onto them under tensor parallelism, and runs forward through
// its method. It never knows which format it holds.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernel_registry.h"
#include "layers/parameter.h"
#include "parallel/communicator.h"
#include "quant/quantization_config.h"

namespace qlm {

// The output tensor of a linear method for input x: zero-filled F32 on the host, uninitialised in
// x's dtype on a device (every device kernel writes every element).
Tensor allocate_linear_output(const Tensor& x, int64_t N);

enum class LinearKind : uint8_t { Replicated, Column, MergedColumn, QKV, Row };
const char* linear_kind_name(LinearKind kind);

struct LinearSpec {
  std::string prefix;  // module name in the model, e.g. "model.layers.0.self_attn.qkv_proj"
  LinearKind kind = LinearKind::Replicated;
  int64_t input_size = 0;   // K
  int64_t output_size = 0;  // N (sum of output_sizes for merged layers)
  bool bias = false;
  DType params_dtype = DType::F32;  // dtype of dense weights/scales in the checkpoint
  // MergedColumn: full size of each part (gate, up).
  std::vector<int64_t> output_sizes;
  // QKV: heads (v_head_size defaults to head_size).
  int64_t head_size = 0, v_head_size = 0, total_num_heads = 0, total_num_kv_heads = 0;
  // Row: sum partial outputs over ranks (false leaves the partial sum to the caller).
  bool reduce_results = true;
  // Checkpoint prefixes of the fused parts ("...q_proj", ...); empty for unfused layers.
  std::vector<std::string> shard_prefixes;
  LayerInfo::Kind info_kind = LayerInfo::Kind::Linear;  // LmHead for the output projection
};

class LinearLayer {
 public:
  // Builds the layer: computes partition sizes (errors name the layer when TP does not divide
  // them), asks `config` (null = unquantized) for the method, and lets the method declare params
  // and choose a kernel.
  LinearLayer(LinearSpec spec, const QuantizationConfig* config, const QuantContext& ctx, TpContext tp);

  const LinearSpec& spec() const { return spec_; }
  const std::string& prefix() const { return spec_.prefix; }
  const TpContext& tp() const { return tp_; }
  const QuantContext& quant_context() const { return ctx_; }
  int64_t input_size_per_partition() const { return K_p_; }
  int64_t output_size_per_partition() const { return N_p_; }
  const std::vector<int64_t>& output_partition_sizes() const { return output_partition_sizes_; }
  // QKV per-rank heads; kv heads are replicated when tp > total kv heads.
  int64_t num_heads() const { return num_heads_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t num_kv_head_replicas() const { return num_kv_head_replicas_; }

  // Parameters, declared by the method in create_weights.
  Parameter& add_param(Parameter p);
  Parameter* find_param(const std::string& name);
  Parameter& param(const std::string& name);  // "loader.unknown_param" naming the layer if absent
  const std::map<std::string, Parameter>& params() const { return params_; }
  std::map<std::string, Parameter>& params() { return params_; }

  // Loads one full checkpoint tensor into parameter `param_name`, for fused part `shard` (Whole
  // for unfused layers and for already-fused checkpoint tensors, which are split by output sizes).
  void load_weight(const std::string& param_name, const Tensor& full, ShardId shard, const std::string& source);

  // Completeness check (every non-optional param fully written), then the method's
  // process_weights_after_loading. Errors name the layer and the unwritten params.
  void finalize();
  bool finalized() const { return finalized_; }
  // Descriptions of the non-optional (or partly written optional) params not fully written;
  // empty when the layer is complete. finalize() throws "loader.incomplete" with this list.
  std::vector<std::string> incomplete_params() const;
  // Every parameter, optional ones included, fully written: nothing more can arrive for this layer.
  bool all_params_written() const;

  // y[M, N_p] (or [M, N] for row-parallel after the reduction) = x · W + bias.
  Tensor forward(const Tensor& x);

  // The prepared weight [N_p, K_p] of an unquantized layer kept plainly on its device (LinearMethod::
  // dense_device_weight), null otherwise; finalize() first.
  const Tensor* dense_device_weight() const { return method_->dense_device_weight(); }
  LinearMethod& method() { return *method_; }
  const LinearMethod& method() const { return *method_; }
  // Set by the method in create_weights: which kernel runs this layer and why not the others.
  KernelSelection kernel_selection;
  // Method-owned per-layer state (the prepared kernel, ...).
  std::shared_ptr<void> method_state;

 private:
  void load_column_part(Parameter& p, const Tensor& full, int64_t part_offset, int64_t part_size,
                        int64_t src_index, const std::string& source);
  void load_fused_whole(Parameter& p, const Tensor& full, const std::string& source);
  void load_split_part(Parameter& p, const Tensor& full, ShardId shard, const std::string& source);
  int64_t disk_units(const Parameter& p, int64_t logical, const std::string& source) const;
  void check_output_extent(const Parameter& p, const Tensor& full, int64_t logical, const std::string& source) const;
  void check_partitions() const;
  Tensor bias_f32_;  // the bias converted once in finalize(), on the layer's device
  LinearSpec spec_;
  QuantContext ctx_;
  TpContext tp_;
  int64_t K_p_ = 0, N_p_ = 0;
  std::vector<int64_t> output_partition_sizes_;
  int64_t num_heads_ = 0, num_kv_heads_ = 0, num_kv_head_replicas_ = 1;
  std::map<std::string, Parameter> params_;
  std::unique_ptr<LinearMethod> method_;
  bool finalized_ = false;
};

}  // namespace qlm
