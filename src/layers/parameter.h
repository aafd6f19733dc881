// Parameters carry their own loading rules (shared/reference/FORMATS.md §4): which checkpoint
// dimension is the input (K) and output (N) dimension, whether one of them is packed and by how
// much, and what kind of tensor it is. `load_*` narrows the full checkpoint tensor to this rank's
// slice, checks the shape (naming the parameter when it does not fit) and records which part of the
// parameter was written, so that every parameter is written exactly once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qlm {

enum class ParamKind : uint8_t {
  Weight,          // dense or fp8/int8 weight: split on N (column) or K (row)
  PackedWeight,    // packed integer weight or zero points: packed_dim carries packed_factor
  PackedColumn,    // packed tensor sharded on N only (replicated along K), e.g. replicated qzeros
  GroupScale,      // group scales partitioned along K
  ChannelScale,    // per-output-channel scales; also group scales replicated on every rank
  BlockScale,      // fp8 block scales: [ceil(N/bn), ceil(K/bk)]
  PerTensorScale,  // one scalar per logical shard (q/k/v, gate/up)
  RowVector,       // per-input-channel vector split on K (g_idx)
  Replicated,      // whole tensor on every rank (weight_shape, scalar input scales)
};
const char* param_kind_name(ParamKind kind);

// Elements per packed storage unit along packed_dim, as a fraction so that 3-bit (32/3) works:
// logical = packed * num / den.
struct PackFactor {
  int64_t num = 1;  // e.g. 32 (bits per int32 word)
  int64_t den = 1;  // e.g. bits per field
  int64_t packed_to_logical(int64_t packed) const { return packed * num / den; }
  // Number of packed units holding `logical` elements (rounded up).
  int64_t logical_to_packed(int64_t logical) const { return (logical * den + num - 1) / num; }
  bool divides(int64_t logical) const { return (logical * den) % num == 0; }
  bool is_one() const { return num == den; }
};

// Identifies the logical sub-matrix of a fused layer a checkpoint tensor belongs to.
struct ShardId {
  enum class Kind : uint8_t { Whole, Index, Q, K, V } kind = Kind::Whole;
  int index = 0;  // for Kind::Index (gate = 0, up = 1)
  static ShardId whole() { return {}; }
  static ShardId at(int i) { return {Kind::Index, i}; }
  static ShardId q() { return {Kind::Q, 0}; }
  static ShardId k() { return {Kind::K, 1}; }
  static ShardId v() { return {Kind::V, 2}; }
  int slot() const { return kind == Kind::Whole ? 0 : index; }  // position in output_partition_sizes
  std::string str() const;
};

class Parameter {
 public:
  Parameter() = default;
  // Declares the parameter; its storage is allocated on the first write (so a load plan can be
  // built for a 70B model without allocating it). Float storage starts as NaN, integer as 0.
  Parameter(std::string name, ParamKind kind, Shape shape, DType dtype);

  const std::string& name() const { return name_; }
  ParamKind kind() const { return kind_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  // The storage (allocated if not yet). Methods replace it in process_weights_after_loading.
  Tensor& data();
  const Tensor& data() const;
  void set_data(Tensor t) { data_ = std::move(t); }
  // Drops the checkpoint-layout storage once the kernel holds its own copy (Model::load does this
  // after process_weights_after_loading, so the weights are not held twice). data() afterwards is
  // an error ("layer.released").
  void release_storage();
  bool released() const { return released_; }

  int input_dim = -1;   // dimension of this tensor that runs along K, -1 if none
  int output_dim = -1;  // dimension that runs along N, -1 if none
  int packed_dim = -1;  // dimension that is packed, -1 if none
  PackFactor packed_factor;
  // Block sizes for BlockScale params ([block_n, block_k]).
  int64_t block_n = 0, block_k = 0;
  // Optional parameters (bias of a GPTQ layer, g_idx without act-order) may stay unwritten.
  bool optional = false;

  // Writes the whole tensor (replicated, or the layer is not fused and not split).
  // Used by ReplicatedLinear and by Replicated/PerTensor params.
  void load_whole(const Tensor& full, const std::string& source);
  // Column-parallel: param slice [dst_offset, dst_offset+size) along output_dim <- checkpoint slice
  // [src_index*size, ...) along output_dim. Offsets and sizes are logical (unpacked) N units; the
  // pack factor is applied when output_dim is packed, block sizes for block scales.
  void load_column(const Tensor& full, int64_t dst_offset, int64_t size, int64_t src_index,
                   const std::string& source);
  // Row-parallel: this rank's K slice of the checkpoint tensor (rank tp_rank of tp_size).
  void load_row(const Tensor& full, int tp_rank, int tp_size, const std::string& source);
  // Per-tensor scale slot `slot` <- a scalar or [1] tensor.
  void load_scalar_slot(const Tensor& full, int slot, const std::string& source);
  // Replicated per-part metadata of a fused layer (e.g. compressed-tensors weight_shape): this
  // parameter is [num_parts, ...] and row `slot` <- `full` of shape [...].
  void load_part_slot(const Tensor& full, int slot, const std::string& source);

  // Whether every element has been written (optional params may be entirely unwritten).
  bool fully_written() const;
  bool written_at_all() const { return !written_.empty(); }
  // Human description of unwritten ranges, for the completeness report.
  std::string unwritten_description() const;

 private:
  // Records that [begin, end) along `dim` (or all of it when dim < 0) was written; a second write
  // to the same elements is an error unless its bytes are identical (fused layers load the same
  // g_idx once per shard).
  void record_write(int dim, int64_t begin, int64_t end, const Tensor& dst_view, const Tensor& src,
                    const std::string& source);
  // Converts (dtype rule), checks the shape, records and copies `src` into [begin, end) along `dim`.
  void write_region(int dim, int64_t begin, int64_t end, const Tensor& src, const std::string& source);
  Tensor convert_source(const Tensor& src, const std::string& source) const;
  std::string name_;
  ParamKind kind_ = ParamKind::Weight;
  Shape shape_;
  DType dtype_ = DType::F32;
  mutable Tensor data_;
  struct Range {
    int dim;  // -1: whole tensor
    int64_t begin, end;
  };
  std::vector<Range> written_;
  bool released_ = false;
};

}  // namespace qlm
