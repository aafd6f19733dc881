#include "layers/linear.h"

#include <numeric>

#include "quant/unquantized.h"

namespace qlm {

const char* linear_kind_name(LinearKind kind) {
  switch (kind) {
    case LinearKind::Replicated: return "ReplicatedLinear";
    case LinearKind::Column: return "ColumnParallelLinear";
    case LinearKind::MergedColumn: return "MergedColumnParallelLinear";
    case LinearKind::QKV: return "QKVParallelLinear";
    case LinearKind::Row: return "RowParallelLinear";
  }
  return "?";
}

namespace {

std::string valid_tp_sizes(int64_t n) {
  std::string s;
  for (int t : {1, 2, 4, 8})
    if (n % t == 0) s += fmt::format("{}{}", s.empty() ? "" : ", ", t);
  return s;
}

int64_t divide_or_fail(int64_t n, int tp, const std::string& what, const std::string& layer) {
  if (n % tp != 0)
    fail("layer.tp_divisibility", {.file = {}, .tensor = {}, .layer = layer},
         fmt::format("use a tensor-parallel size that divides {} (e.g. {})", n, valid_tp_sizes(n)),
         "{} = {} is not divisible by the tensor-parallel size {}", what, n, tp);
  return n / tp;
}

// Whether a parameter of this kind is split along K in a row-parallel layer (FORMATS.md §4.4);
// the others (per-channel scales, replicated act-order tables, packed-along-N zeros) are whole.
bool splits_along_k(ParamKind kind) {
  switch (kind) {
    case ParamKind::Weight:
    case ParamKind::PackedWeight:
    case ParamKind::GroupScale:
    case ParamKind::BlockScale:
    case ParamKind::RowVector: return true;
    case ParamKind::PackedColumn:
    case ParamKind::ChannelScale:
    case ParamKind::PerTensorScale:
    case ParamKind::Replicated: return false;
  }
  return false;
}

int64_t field_bits(const PackFactor& f) { return 32 * f.den / f.num; }
int64_t packing_granule(const PackFactor& f) { return f.num / std::gcd(f.num, f.den); }

bool is_fused(LinearKind kind) { return kind == LinearKind::MergedColumn || kind == LinearKind::QKV; }

}  // namespace

LinearLayer::LinearLayer(LinearSpec spec, const QuantizationConfig* config, const QuantContext& ctx, TpContext tp)
    : spec_(std::move(spec)), ctx_(ctx), tp_(tp) {
  const std::string& name = spec_.prefix;
  const int T = tp_.size;
  if (T < 1 || tp_.rank < 0 || tp_.rank >= T)
    fail("layer.tp", {.file = {}, .tensor = {}, .layer = name}, "", "invalid tensor-parallel rank {} of size {}", tp_.rank, T);
  if (spec_.input_size <= 0)
    fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "input size must be positive, got {}", spec_.input_size);
  const int64_t K = spec_.input_size;
  K_p_ = K;
  switch (spec_.kind) {
    case LinearKind::Replicated:
      N_p_ = spec_.output_size;
      output_partition_sizes_ = {N_p_};
      break;
    case LinearKind::Column:
      N_p_ = divide_or_fail(spec_.output_size, T, "output size", name);
      output_partition_sizes_ = {N_p_};
      break;
    case LinearKind::MergedColumn: {
      if (spec_.output_sizes.empty())
        fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "a merged column-parallel layer needs output_sizes");
      int64_t total = std::accumulate(spec_.output_sizes.begin(), spec_.output_sizes.end(), int64_t{0});
      if (spec_.output_size == 0) spec_.output_size = total;
      if (spec_.output_size != total)
        fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "output_size {} differs from the sum {} of output_sizes",
             spec_.output_size, total);
      for (size_t i = 0; i < spec_.output_sizes.size(); ++i)
        output_partition_sizes_.push_back(
            divide_or_fail(spec_.output_sizes[i], T, fmt::format("output size of part {}", i), name));
      N_p_ = total / T;
      break;
    }
    case LinearKind::QKV: {
      if (spec_.v_head_size == 0) spec_.v_head_size = spec_.head_size;
      if (spec_.head_size <= 0 || spec_.total_num_heads <= 0 || spec_.total_num_kv_heads <= 0)
        fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "QKV layer needs positive head_size, num_heads and num_kv_heads");
      num_heads_ = divide_or_fail(spec_.total_num_heads, T, "num_attention_heads", name);
      if (T >= spec_.total_num_kv_heads) {
        if (T % spec_.total_num_kv_heads != 0)
          fail("layer.tp_divisibility", {.file = {}, .tensor = {}, .layer = name},
               fmt::format("use a tensor-parallel size that divides {} or is a multiple of it",
                           spec_.total_num_kv_heads),
               "tensor-parallel size {} is not a multiple of num_key_value_heads = {}", T,
               spec_.total_num_kv_heads);
        num_kv_heads_ = 1;
        num_kv_head_replicas_ = T / spec_.total_num_kv_heads;
      } else {
        num_kv_heads_ = divide_or_fail(spec_.total_num_kv_heads, T, "num_key_value_heads", name);
        num_kv_head_replicas_ = 1;
      }
      output_partition_sizes_ = {num_heads_ * spec_.head_size, num_kv_heads_ * spec_.head_size,
                                 num_kv_heads_ * spec_.v_head_size};
      N_p_ = std::accumulate(output_partition_sizes_.begin(), output_partition_sizes_.end(), int64_t{0});
      const int64_t disk_n = spec_.total_num_heads * spec_.head_size +
                             spec_.total_num_kv_heads * (spec_.head_size + spec_.v_head_size);
      if (spec_.output_size == 0) spec_.output_size = disk_n;
      if (spec_.output_size != disk_n)
        fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "output_size {} differs from the q/k/v total {}", spec_.output_size,
             disk_n);
      break;
    }
    case LinearKind::Row:
      K_p_ = divide_or_fail(K, T, "input size", name);
      N_p_ = spec_.output_size;
      output_partition_sizes_ = {N_p_};
      if (spec_.bias && !spec_.reduce_results)
        fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "add the bias after reducing the results yourself",
             "a row-parallel layer with a bias must reduce its results");
      break;
  }
  if (N_p_ <= 0) fail("layer.spec", {.file = {}, .tensor = {}, .layer = name}, "", "output size must be positive, got {}", spec_.output_size);

  LayerInfo info{.kind = spec_.info_kind, .prefix = name, .shard_prefixes = spec_.shard_prefixes,
                 .row_parallel = K_p_ != K};
  try {
    method_ = config ? config->get_linear_method(info, ctx_) : make_unquantized_linear_method();
    if (!method_)
      fail("layer.no_method", {}, "the quantization format must return a method (or the unquantized one) for every linear layer",
           "quantization format '{}' returned no method for this {}", config->name(), linear_kind_name(spec_.kind));
    // The N every rank's method sees as the whole layer: kv heads count once per replica.
    const int64_t N_arg = spec_.kind == LinearKind::Replicated || spec_.kind == LinearKind::Row ? N_p_ : N_p_ * T;
    method_->create_weights(*this, K_p_, output_partition_sizes_, K, N_arg, spec_.params_dtype);
    if (spec_.bias) {
      // Column layers split the bias with N; a row-parallel bias is whole and added on rank 0 only.
      const bool row = spec_.kind == LinearKind::Row;
      Parameter b("bias", row ? ParamKind::Replicated : ParamKind::Weight, {N_p_}, spec_.params_dtype);
      if (!row) b.output_dim = 0;
      add_param(std::move(b));
    }
    check_partitions();
  } catch (const Error& e) {
    throw e.with_context({.file = {}, .tensor = {}, .layer = name});
  }
}

// T8: tensor-parallel slices of packed or blocked dimensions must land on whole storage units;
// checked from the declared shapes before any tensor is read.
void LinearLayer::check_partitions() const {
  const int T = tp_.size;
  for (const auto& [pname, p] : params_) {
    if (p.packed_dim >= 0 && !p.packed_factor.is_one()) {
      const PackFactor& f = p.packed_factor;
      if (p.packed_dim == p.input_dim && spec_.kind == LinearKind::Row && T > 1 && !f.divides(K_p_)) {
        std::string ok;
        for (int t : {1, 2, 4, 8})  // tp 1 never splits K
          if (t == 1 || (spec_.input_size % t == 0 && f.divides(spec_.input_size / t)))
            ok += fmt::format("{}{}", ok.empty() ? "" : " or ", t);
        fail("layer.packed_split", {.file = {}, .tensor = {}, .layer = prefix()}, fmt::format("use tp {}", ok),
             "parameter '{}': K per rank {} is not a multiple of {} for {}-bit packing, so the tensor-parallel "
             "split would cut a packed word",
             pname, K_p_, packing_granule(f), field_bits(f));
      }
      if (p.packed_dim == p.output_dim)
        for (int64_t part : output_partition_sizes_)
          if (!f.divides(part))
            fail("layer.packed_split", {.file = {}, .tensor = {}, .layer = prefix()},
                 "use a tensor-parallel size that keeps every output slice a multiple of the packing",
                 "parameter '{}': output slice {} per rank is not a multiple of {} for {}-bit packing", pname, part,
                 packing_granule(f), field_bits(f));
    }
    if (p.kind() == ParamKind::BlockScale && T > 1) {
      if (spec_.kind == LinearKind::Row && p.block_k > 0 && K_p_ % p.block_k != 0)
        fail("layer.block_split", {.file = {}, .tensor = {}, .layer = prefix()}, "use a tensor-parallel size that splits K on block boundaries",
             "parameter '{}': K per rank {} is not a multiple of the block size {}, so a block straddles ranks",
             pname, K_p_, p.block_k);
      const bool column = spec_.kind == LinearKind::Column || is_fused(spec_.kind);
      if (column && p.block_n > 0)
        for (int64_t part : output_partition_sizes_)
          if (part % p.block_n != 0)
            fail("layer.block_split", {.file = {}, .tensor = {}, .layer = prefix()},
                 "use a tensor-parallel size that splits N on block boundaries",
                 "parameter '{}': output slice {} per rank is not a multiple of the block size {}, so a block "
                 "straddles ranks",
                 pname, part, p.block_n);
    }
  }
}

Parameter& LinearLayer::add_param(Parameter p) {
  std::string name = p.name();
  auto [it, inserted] = params_.emplace(name, std::move(p));
  if (!inserted)
    fail("layer.duplicate_param", {.file = {}, .tensor = {}, .layer = prefix()}, "", "parameter '{}' is declared twice", name);
  return it->second;
}

Parameter* LinearLayer::find_param(const std::string& name) {
  auto it = params_.find(name);
  return it == params_.end() ? nullptr : &it->second;
}

Parameter& LinearLayer::param(const std::string& name) {
  if (Parameter* p = find_param(name)) return *p;
  std::string known;
  for (const auto& [n, _] : params_) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
  fail("loader.unknown_param", {.file = {}, .tensor = {}, .layer = prefix()}, "", "{} ({}) has no parameter '{}'; it has: {}",
       linear_kind_name(spec_.kind), method_ ? method_->name() : "?", name, known);
}

// Extent of a checkpoint tensor along the param's output dim for `logical` outputs.
int64_t LinearLayer::disk_units(const Parameter& p, int64_t logical, const std::string& source) const {
  if (p.packed_dim == p.output_dim && !p.packed_factor.is_one()) {
    if (!p.packed_factor.divides(logical))
      fail("loader.packed_split", {.file = {}, .tensor = source, .layer = {}}, "",
           "parameter '{}': {} outputs are not a multiple of {} for {}-bit packing", p.name(), logical,
           packing_granule(p.packed_factor), field_bits(p.packed_factor));
    return logical * p.packed_factor.den / p.packed_factor.num;
  }
  if (p.kind() == ParamKind::BlockScale) return (logical + p.block_n - 1) / p.block_n;
  return logical;
}

void LinearLayer::check_output_extent(const Parameter& p, const Tensor& full, int64_t logical,
                                      const std::string& source) const {
  const int64_t expected = disk_units(p, logical, source);
  if (full.dim() != static_cast<int64_t>(p.shape().size()) || full.size(p.output_dim) != expected)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}},
         "check the checkpoint against config.json (hidden sizes, head counts, packing)",
         "parameter '{}' expects checkpoint tensor '{}' to have {} along dim {} ({} outputs) but it is {}", p.name(),
         source, expected, p.output_dim, logical, full.str());
}

void LinearLayer::load_column_part(Parameter& p, const Tensor& full, int64_t part_offset, int64_t part_size,
                                   int64_t src_index, const std::string& source) {
  if (p.output_dim < 0) {
    // Same tensor for every part (FORMATS.md §4.3): identical copies are accepted.
    p.load_whole(full, source);
    return;
  }
  p.load_column(full, part_offset, part_size, src_index, source);
}

// One part of a fused layer (or the single part of an unfused column layer) for a param that
// is split along N.
void LinearLayer::load_split_part(Parameter& p, const Tensor& full, ShardId shard, const std::string& source) {
  const int64_t r = tp_.rank;
  switch (spec_.kind) {
    case LinearKind::Replicated:
    case LinearKind::Row: QLM_CHECK(false); return;
    case LinearKind::Column:
      if (p.output_dim >= 0) check_output_extent(p, full, spec_.output_size, source);
      load_column_part(p, full, 0, N_p_, r, source);
      return;
    case LinearKind::MergedColumn: {
      const auto i = static_cast<size_t>(shard.index);
      const int64_t offset = std::accumulate(output_partition_sizes_.begin(),
                                             output_partition_sizes_.begin() + shard.index, int64_t{0});
      if (p.output_dim >= 0) check_output_extent(p, full, spec_.output_sizes[i], source);
      load_column_part(p, full, offset, output_partition_sizes_[i], r, source);
      return;
    }
    case LinearKind::QKV: {
      const int64_t hd = spec_.head_size, vhd = spec_.v_head_size;
      int64_t offset = 0, size = 0, total = 0, src = r;
      switch (shard.kind) {
        case ShardId::Kind::Q:
          size = num_heads_ * hd;
          total = spec_.total_num_heads * hd;
          break;
        case ShardId::Kind::K:
          offset = num_heads_ * hd;
          size = num_kv_heads_ * hd;
          total = spec_.total_num_kv_heads * hd;
          src = r / num_kv_head_replicas_;
          break;
        case ShardId::Kind::V:
          offset = (num_heads_ + num_kv_heads_) * hd;
          size = num_kv_heads_ * vhd;
          total = spec_.total_num_kv_heads * vhd;
          src = r / num_kv_head_replicas_;
          break;
        case ShardId::Kind::Whole:
        case ShardId::Kind::Index: QLM_CHECK(false); return;
      }
      if (p.output_dim >= 0) check_output_extent(p, full, total, source);
      load_column_part(p, full, offset, size, src, source);
      return;
    }
  }
}

// An already-fused checkpoint tensor (gate_up_proj, qkv_proj on disk): split along N by the
// full output sizes (q/k/v by head counts), then loaded part by part.
void LinearLayer::load_fused_whole(Parameter& p, const Tensor& full, const std::string& source) {
  if (p.output_dim < 0) {
    p.load_whole(full, source);
    return;
  }
  std::vector<std::pair<ShardId, int64_t>> parts;
  if (spec_.kind == LinearKind::QKV) {
    parts = {{ShardId::q(), spec_.total_num_heads * spec_.head_size},
             {ShardId::k(), spec_.total_num_kv_heads * spec_.head_size},
             {ShardId::v(), spec_.total_num_kv_heads * spec_.v_head_size}};
  } else {
    for (size_t i = 0; i < spec_.output_sizes.size(); ++i)
      parts.emplace_back(ShardId::at(static_cast<int>(i)), spec_.output_sizes[i]);
  }
  int64_t total = 0;
  std::string sizes;
  for (const auto& [id, logical] : parts) {
    total += disk_units(p, logical, source);
    sizes += fmt::format("{}{}", sizes.empty() ? "" : " + ", disk_units(p, logical, source));
  }
  if (full.dim() != static_cast<int64_t>(p.shape().size()) || full.size(p.output_dim) != total)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, "check the checkpoint against config.json (sizes and head counts)",
         "fused checkpoint tensor '{}' {} should have {} = {} along dim {} for parameter '{}'", source, full.str(),
         total, sizes, p.output_dim, p.name());
  int64_t offset = 0;
  for (const auto& [id, logical] : parts) {
    const int64_t units = disk_units(p, logical, source);
    load_split_part(p, full.narrow(p.output_dim, offset, units), id, source);
    offset += units;
  }
}

void LinearLayer::load_weight(const std::string& param_name, const Tensor& full, ShardId shard,
                              const std::string& source) {
  try {
    Parameter& p = param(param_name);
    bool valid_shard = shard.kind == ShardId::Kind::Whole;
    if (spec_.kind == LinearKind::MergedColumn && shard.kind == ShardId::Kind::Index)
      valid_shard = shard.index >= 0 && static_cast<size_t>(shard.index) < spec_.output_sizes.size();
    if (spec_.kind == LinearKind::QKV)
      valid_shard = valid_shard || shard.kind == ShardId::Kind::Q || shard.kind == ShardId::Kind::K ||
                    shard.kind == ShardId::Kind::V;
    if (!valid_shard)
      fail("loader.shard_id", {}, "",
           "shard id '{}' is not valid for a {} (expected {})", shard.str(), linear_kind_name(spec_.kind),
           spec_.kind == LinearKind::QKV            ? "q, k or v"
           : spec_.kind == LinearKind::MergedColumn ? fmt::format("0..{}", spec_.output_sizes.size() - 1)
                                                    : std::string("no shard id"));
    const int r = tp_.rank, T = tp_.size;
    switch (p.kind()) {
      case ParamKind::PerTensorScale:
        if (!is_fused(spec_.kind)) {
          p.load_whole(full, source);
        } else if (shard.kind != ShardId::Kind::Whole) {
          p.load_scalar_slot(full, shard.slot(), source);
        } else {
          // Fused on disk: one scale for all parts, or one per part.
          const auto n = static_cast<int64_t>(output_partition_sizes_.size());
          Tensor flat = full.contiguous().view({full.numel()});
          for (int64_t i = 0; i < n; ++i)
            p.load_scalar_slot(flat.numel() == n ? flat.narrow(0, i, 1) : full, static_cast<int>(i), source);
        }
        return;
      case ParamKind::Replicated: {
        // Per-part metadata of a fused layer: one row per part ([num_parts, ...]).
        const auto parts = static_cast<int64_t>(output_partition_sizes_.size());
        const bool per_part = is_fused(spec_.kind) && p.shape().size() == static_cast<size_t>(full.dim()) + 1 &&
                              p.shape()[0] == parts;
        if (!per_part) {
          p.load_whole(full, source);
        } else if (shard.kind != ShardId::Kind::Whole) {
          p.load_part_slot(full, shard.slot(), source);
        } else {
          for (int64_t i = 0; i < parts; ++i) p.load_part_slot(full, static_cast<int>(i), source);
        }
        return;
      }
      case ParamKind::RowVector:
        if (spec_.kind == LinearKind::Row) p.load_row(full, r, T, source);
        else p.load_whole(full, source);
        return;
      case ParamKind::Weight:
      case ParamKind::PackedWeight:
      case ParamKind::PackedColumn:
      case ParamKind::GroupScale:
      case ParamKind::ChannelScale:
      case ParamKind::BlockScale: break;
    }
    switch (spec_.kind) {
      case LinearKind::Replicated: p.load_whole(full, source); return;
      case LinearKind::Row:
        if (p.input_dim >= 0 && splits_along_k(p.kind())) p.load_row(full, r, T, source);
        else p.load_whole(full, source);
        return;
      case LinearKind::Column: load_split_part(p, full, shard, source); return;
      case LinearKind::MergedColumn:
      case LinearKind::QKV:
        if (shard.kind == ShardId::Kind::Whole) load_fused_whole(p, full, source);
        else load_split_part(p, full, shard, source);
        return;
    }
  } catch (const Error& e) {
    throw e.with_context({.file = {}, .tensor = source, .layer = prefix()});
  }
}

std::vector<std::string> LinearLayer::incomplete_params() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : params_)
    if ((!p.optional || p.written_at_all()) && !p.fully_written()) out.push_back(p.unwritten_description());
  return out;
}

bool LinearLayer::all_params_written() const {
  for (const auto& [name, p] : params_)
    if (!p.fully_written()) return false;
  return true;
}

void LinearLayer::finalize() {
  if (finalized_) return;
  std::vector<std::string> missing = incomplete_params();
  if (!missing.empty())
    fail("loader.incomplete", {.file = {}, .tensor = {}, .layer = prefix()},
         "the checkpoint lacks these tensors; if this layer is stored unquantized, list it in the quantization "
         "config's ignore list",
         "{} ({}) has {} parameter(s) not fully written: {}", linear_kind_name(spec_.kind), method_->name(),
         missing.size(), fmt::join(missing, "; "));
  try {
    method_->process_weights_after_loading(*this);
    if (spec_.bias) {
      bias_f32_ = param("bias").data().to(DType::F32);
      if (!ctx_.device.is_cpu()) bias_f32_ = bias_f32_.to_device(ctx_.device);
    }
    if (ctx_.release_checkpoint_tensors)
      for (auto& [name, p] : params_) p.release_storage();
  } catch (const Error& e) {
    throw e.with_context({.file = {}, .tensor = {}, .layer = prefix()});
  }
  finalized_ = true;
}

Tensor allocate_linear_output(const Tensor& x, int64_t N) {
  if (x.on_host()) return Tensor::zeros({x.size(0), N}, DType::F32);
  return Tensor::empty({x.size(0), N}, x.dtype(), x.device());
}

Tensor LinearLayer::forward(const Tensor& x) {
  if (!finalized_)
    fail("layer.not_finalized", {.file = {}, .tensor = {}, .layer = prefix()}, "load the checkpoint (and finalize) before running",
         "forward() called before finalize()");
  const DType want = ctx_.device.is_cpu() ? DType::F32 : ctx_.act_dtype;
  if (x.dim() != 2 || x.size(1) != K_p_ || x.dtype() != want || !(x.device() == ctx_.device))
    fail("layer.input_shape", {.file = {}, .tensor = {}, .layer = prefix()}, "",
         "expects {}[M, {}] input on {}, got {} on {}", dtype_name(want), K_p_, ctx_.device.str(), x.str(),
         x.device().str());
  const bool add_bias = spec_.bias && (spec_.kind != LinearKind::Row || tp_.rank == 0);
  Tensor y = method_->apply(*this, x.contiguous(), add_bias ? &bias_f32_ : nullptr);
  if (spec_.kind == LinearKind::Row && tp_.size > 1 && spec_.reduce_results) {
    if (!tp_.comm)
      fail("layer.no_comm", {.file = {}, .tensor = {}, .layer = prefix()}, "pass a TpContext with a communicator",
           "row-parallel layer at tensor-parallel size {} has no communicator to reduce its results", tp_.size);
    tp_.comm->all_reduce_sum(y);
  }
  return y;
}

}  // namespace qlm
