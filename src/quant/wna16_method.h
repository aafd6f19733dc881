// Shared logic of the weight-only integer ("WNA16") linear methods of GPTQ, AWQ and
// compressed-tensors pack-quantized. A format supplies only what differs: the parameters in its
// checkpoint layout and their conversion to the standard form (quant/wna16_weights.h). Everything
// else lives here: partition geometry and divisibility errors, kernel selection, value validation
// (RELIABILITY.md T1-T5), kernel creation and forward.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/mp_linear.h"
#include "layers/linear.h"
#include "quant/quantization_config.h"
#include "quant/wna16_weights.h"

namespace qlm {

// The numerics of one quantized layer (after per-module overrides).
struct WNA16Scheme {
  int bits = 4;
  bool symmetric = true;    // zero point implied by the type bias 2^(bits-1)
  int64_t group_size = -1;  // rows of K per scale; -1: one group spanning K (channelwise)
  bool act_order = false;   // rows are grouped by g_idx (GPTQ desc_act, compressed-tensors actorder=group)
  PackedIntType weight_type() const {
    return {bits, symmetric ? 1 << (bits - 1) : 0};
  }
  std::string describe() const;  // "uint4b8 g128 act-order"
  friend bool operator==(const WNA16Scheme&, const WNA16Scheme&) = default;
};

// Shapes of one layer on this rank, fixed in create_weights.
struct WNA16Geometry {
  int64_t K = 0, N = 0;      // full layer
  int64_t K_p = 0, N_p = 0;  // this rank
  std::vector<int64_t> output_partition_sizes;
  bool row_parallel = false;  // K is split across ranks
  int tp_rank = 0, tp_size = 1;
  // vLLM's marlin_repeat_scales_on_all_ranks: act-order, or channelwise on a row-parallel layer.
  // Then every rank holds the full scale (and zero-point) table.
  bool replicate_scales = false;
  int64_t group_rows = 0;   // rows per group (K for channelwise)
  int64_t scale_rows = 0;   // scale rows held on this rank: K/group_rows when replicated, else K_p/group_rows
  int64_t k_offset() const { return row_parallel ? K_p * tp_rank : 0; }  // first global row of this rank
};

class WNA16LinearMethod : public LinearMethod {
 public:
  WNA16LinearMethod(std::string format, WNA16Scheme scheme);

  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes, int64_t K,
                      int64_t N, DType params_dtype) final;
  void process_weights_after_loading(LinearLayer& layer) final;
  Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) final;
  std::string name() const override { return format_; }
  std::string describe() const override;

  const WNA16Scheme& scheme() const { return scheme_; }
  const WNA16Geometry& geometry() const { return geo_; }
  const MPLinearLayerConfig& kernel_config() const { return cfg_; }
  // The standard form handed to the kernel (kept only when keep_standard_form() is set; tests).
  const std::optional<WNA16Weights>& standard_form() const { return kept_; }
  void keep_standard_form(bool keep) { keep_ = keep; }
  // Frees the kept standard form (a grouped MoE kernel that repacked it).
  void release_standard_form() { kept_.reset(); }
  // For a fused-MoE kernel that runs the experts from their standard form alone
  // (MoEKernel::runs_wna16_experts): process_weights_after_loading keeps the standard form and
  // builds no kernel, so the weights are held once; apply() then fails ("quant.moe_expert").
  void standard_form_only(bool on) { standard_only_ = on; }
  // Load-time warnings (zero scales, ...), also printed to stderr.
  const std::vector<std::string>& warnings() const { return warnings_; }

 protected:
  // Format-specific shape constraints (pack factors along N or K); errors name the layer.
  virtual void check_partition(const LinearLayer& layer, const WNA16Geometry& geo) const = 0;
  // Declares the checkpoint-layout parameters on `layer`.
  virtual void declare_params(LinearLayer& layer, const WNA16Geometry& geo) const = 0;
  // Converts the loaded parameters to the standard form. Scales come back as loaded (F32); zero
  // points as true zeros (the format's convention applied); shared checks run afterwards.
  // g_idx is filled in by the shared code from the parameter named by g_idx_param().
  virtual WNA16Weights to_standard_form(LinearLayer& layer, const WNA16Geometry& geo) const = 0;
  // Name of the g_idx parameter (required under act-order, optional otherwise), or nullptr.
  virtual const char* g_idx_param() const = 0;

  const std::string& format() const { return format_; }

 private:
  void attach_g_idx(LinearLayer& layer, WNA16Weights& w) const;
  void validate(const LinearLayer& layer, const WNA16Weights& w);
  std::string format_;
  WNA16Scheme scheme_;
  WNA16Geometry geo_;
  MPLinearLayerConfig cfg_;
  std::string kernel_name_;
  std::unique_ptr<MPLinearKernel> kernel_;
  bool keep_ = false;
  bool standard_only_ = false;
  std::optional<WNA16Weights> kept_;
  std::vector<std::string> warnings_;
};

// ---- helpers for the formats' conversions ----

// Codes [rows, cols] -> [cols, rows].
std::vector<uint8_t> transpose_codes(const std::vector<uint8_t>& codes, int64_t rows, int64_t cols);
// I32 tensor [rows, cols] from unsigned codes, optionally adding `offset` to every value.
Tensor codes_to_i32(const std::vector<uint8_t>& codes, int64_t rows, int64_t cols, int offset = 0);
// F32 copy of a 2-D tensor, transposed.
Tensor transpose_f32(const Tensor& t);

// Checks shared by every format (RELIABILITY.md T3-T5). `layer` and `tensor` name the location.
// Scales: NaN, Inf and negative values are errors ("weights.scale"); returns the number of zeros.
int64_t check_scales(const Tensor& scales_f32, const std::string& layer, const std::string& tensor);
// True zero points within [0, 2^bits - 1] ("weights.zero_point"); `convention` explains how they
// were derived ("stored + 1 (GPTQ v1)").
void check_zero_points(const Tensor& zeros_i32, int bits, const std::string& layer, const std::string& tensor,
                       const std::string& convention);

}  // namespace qlm
