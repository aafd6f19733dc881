#include "layers/parameter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/float_convert.h"
#include "layers/tensor_copy.h"

namespace qlm {

const char* param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::Weight: return "weight";
    case ParamKind::PackedWeight: return "packed weight";
    case ParamKind::PackedColumn: return "packed column";
    case ParamKind::GroupScale: return "group scale";
    case ParamKind::ChannelScale: return "channel scale";
    case ParamKind::BlockScale: return "block scale";
    case ParamKind::PerTensorScale: return "per-tensor scale";
    case ParamKind::RowVector: return "row vector";
    case ParamKind::Replicated: return "replicated";
  }
  return "?";
}

std::string ShardId::str() const {
  switch (kind) {
    case Kind::Whole: return "whole";
    case Kind::Index: return std::to_string(index);
    case Kind::Q: return "q";
    case Kind::K: return "k";
    case Kind::V: return "v";
  }
  return "?";
}

namespace {

// A written region: [lo[d], hi[d]) in every dimension.
struct Box {
  std::vector<int64_t> lo, hi;
  bool empty() const {
    for (size_t d = 0; d < lo.size(); ++d)
      if (lo[d] >= hi[d]) return true;
    return false;
  }
};

Box box_of(const Shape& shape, int dim, int64_t begin, int64_t end) {
  Box b{std::vector<int64_t>(shape.size(), 0), shape};
  if (dim >= 0) {
    b.lo[static_cast<size_t>(dim)] = begin;
    b.hi[static_cast<size_t>(dim)] = end;
  }
  return b;
}

Box intersect(const Box& a, const Box& b) {
  Box r = a;
  for (size_t d = 0; d < a.lo.size(); ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::min(a.hi[d], b.hi[d]);
  }
  return r;
}

// `t` (covering `outer`) narrowed to `inner` (a sub-box of outer).
Tensor narrow_to(const Tensor& t, const Box& outer, const Box& inner) {
  Tensor v = t;
  for (size_t d = 0; d < outer.lo.size(); ++d)
    v = v.narrow(static_cast<int64_t>(d), inner.lo[d] - outer.lo[d], inner.hi[d] - inner.lo[d]);
  return v;
}

// Cells of the grid spanned by every box edge that no box covers (exact coverage test for a
// handful of boxes).
std::vector<Box> uncovered_cells(const Shape& shape, const std::vector<Box>& boxes) {
  const size_t nd = shape.size();
  std::vector<std::vector<int64_t>> edges(nd);
  for (size_t d = 0; d < nd; ++d) {
    edges[d] = {0, shape[d]};
    for (const Box& b : boxes) {
      edges[d].push_back(b.lo[d]);
      edges[d].push_back(b.hi[d]);
    }
    std::sort(edges[d].begin(), edges[d].end());
    edges[d].erase(std::unique(edges[d].begin(), edges[d].end()), edges[d].end());
  }
  std::vector<Box> out;
  std::vector<size_t> idx(nd, 0);
  for (;;) {
    Box cell{std::vector<int64_t>(nd), std::vector<int64_t>(nd)};
    bool valid = true;
    for (size_t d = 0; d < nd; ++d) {
      if (idx[d] + 1 >= edges[d].size()) valid = false;
      else {
        cell.lo[d] = edges[d][idx[d]];
        cell.hi[d] = edges[d][idx[d] + 1];
      }
    }
    if (!valid) break;  // a zero-size dimension: nothing to cover
    bool covered = std::any_of(boxes.begin(), boxes.end(), [&](const Box& b) {
      for (size_t d = 0; d < nd; ++d)
        if (cell.lo[d] < b.lo[d] || cell.hi[d] > b.hi[d]) return false;
      return true;
    });
    if (!covered) out.push_back(cell);
    bool done = true;
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] + 1 < edges[d].size()) {
        done = false;
        break;
      }
      idx[d] = 0;
    }
    if (done) break;
  }
  return out;
}

std::string box_str(const Box& b) {
  std::string s;
  for (size_t d = 0; d < b.lo.size(); ++d)
    s += fmt::format("{}[{}, {})", d ? " x " : "", b.lo[d], b.hi[d]);
  return s;
}

// Bits per packed field implied by a pack factor over 32-bit words, for messages.
int64_t field_bits(const PackFactor& f) { return 32 * f.den / f.num; }
// Smallest logical extent that packs into whole storage units.
int64_t packing_granule(const PackFactor& f) { return f.num / std::gcd(f.num, f.den); }

void fill_sentinel(Tensor& t) {
  std::byte* p = t.raw_data();
  const size_t n = static_cast<size_t>(t.numel());
  auto fill = [&]<typename T>(T value) {
    for (size_t i = 0; i < n; ++i) std::memcpy(p + i * sizeof(T), &value, sizeof(T));
  };
  switch (t.dtype()) {
    case DType::F64: return fill(std::numeric_limits<double>::quiet_NaN());
    case DType::F32: return fill(std::numeric_limits<float>::quiet_NaN());
    case DType::F16: return fill(uint16_t{0x7e00});
    case DType::BF16: return fill(uint16_t{0x7fc0});
    case DType::F8_E4M3: return fill(uint8_t{0x7f});
    case DType::F8_E5M2: return fill(uint8_t{0x7f});
    case DType::F8_E8M0: return fill(uint8_t{0xff});
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ: return fill(uint8_t{0x80});
    case DType::I64:
    case DType::I32:
    case DType::I16:
    case DType::I8:
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64:
    case DType::BOOL:
    case DType::F4:
    case DType::F6_E2M3:
    case DType::F6_E3M2:
    case DType::C64: std::memset(p, 0, t.nbytes()); return;
  }
}

bool is_scale_kind(ParamKind k) {
  switch (k) {
    case ParamKind::GroupScale:
    case ParamKind::ChannelScale:
    case ParamKind::BlockScale:
    case ParamKind::PerTensorScale:
    case ParamKind::Replicated: return true;
    case ParamKind::Weight:
    case ParamKind::PackedWeight:
    case ParamKind::PackedColumn:
    case ParamKind::RowVector: return false;
  }
  return false;
}

const char* kShapeRemedy =
    "check that the checkpoint matches config.json (sizes, bits, group_size) and the tensor-parallel size";

}  // namespace

Parameter::Parameter(std::string name, ParamKind kind, Shape shape, DType dtype)
    : name_(std::move(name)), kind_(kind), shape_(std::move(shape)), dtype_(dtype) {
  shape_numel(shape_);  // validates
}

void Parameter::release_storage() {
  data_ = Tensor();
  released_ = true;
}

Tensor& Parameter::data() {
  if (released_)
    fail("layer.released", {.file = {}, .tensor = name_, .layer = {}},
         "read parameters before the model finishes loading, or load with release_checkpoint_tensors = false",
         "parameter {} was released after its kernel took its own copy of the weights", name_);
  if (!data_.defined()) {
    data_ = Tensor::empty(shape_, dtype_);
    fill_sentinel(data_);
  }
  return data_;
}

const Tensor& Parameter::data() const {
  return const_cast<Parameter*>(this)->data();
}

// The checkpoint tensor in this parameter's dtype: equal dtypes, or f16/bf16 scales into an F32
// scale parameter (exact).
Tensor Parameter::convert_source(const Tensor& src, const std::string& source) const {
  if (src.dtype() == dtype_) return src;
  const bool widen = dtype_ == DType::F32 && is_scale_kind(kind_) &&
                     (src.dtype() == DType::F16 || src.dtype() == DType::BF16);
  if (widen) return src.to(DType::F32);
  // Integer metadata (compressed-tensors writes weight_shape as I32 or I64) widens exactly.
  const bool widen_int = dtype_ == DType::I64 && kind_ == ParamKind::Replicated &&
                         (src.dtype() == DType::I32 || src.dtype() == DType::I16 || src.dtype() == DType::I8);
  if (widen_int) return src.to(DType::I64);
  fail("loader.dtype", {.file = {}, .tensor = source, .layer = {}},
       "the checkpoint does not match what config.json declares; check torch_dtype and the quantization format",
       "parameter '{}' ({}) has dtype {} but checkpoint tensor '{}' is {}", name_, param_kind_name(kind_),
       dtype_name(dtype_), source, src.str());
}

void Parameter::write_region(int dim, int64_t begin, int64_t end, const Tensor& src, const std::string& source) {
  Tensor value = convert_source(src, source);
  Tensor& storage = data();
  Tensor dst = dim < 0 ? storage : storage.narrow(dim, begin, end - begin);
  if (dst.shape() != value.shape()) {
    // Scalars: a [1] parameter accepts a 0-dim tensor and the other way round.
    if (dst.numel() == 1 && value.numel() == 1) value = value.contiguous().view(dst.shape());
    else
      fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
           "parameter '{}' expects {} here but checkpoint tensor '{}' gives {}", name_, shape_str(dst.shape()),
           source, shape_str(value.shape()));
  }
  record_write(dim, begin, end, dst, value, source);
  copy_elements(dst, value);
}

void Parameter::record_write(int dim, int64_t begin, int64_t end, const Tensor& dst_view, const Tensor& src,
                             const std::string& source) {
  const Box fresh = box_of(shape_, dim, begin, end);
  for (const Range& r : written_) {
    Box overlap = intersect(fresh, box_of(shape_, r.dim, r.begin, r.end));
    if (overlap.empty()) continue;
    // Fused layers load identical tensors (g_idx, replicated scales) once per part: allowed.
    if (bytes_equal(narrow_to(dst_view, fresh, overlap), narrow_to(src, fresh, overlap))) continue;
    fail("loader.double_write", {.file = {}, .tensor = source, .layer = {}},
         "the checkpoint holds two different tensors for the same weights; remove the duplicate",
         "parameter '{}' {} was already written with different values; checkpoint tensor '{}' writes it again",
         name_, box_str(overlap), source);
  }
  written_.push_back({dim, begin, end});
}

void Parameter::load_whole(const Tensor& full, const std::string& source) {
  const bool scalars = full.numel() == 1 && shape_numel(shape_) == 1 && full.dim() <= 1 && shape_.size() <= 1;
  if (full.shape() != shape_ && !scalars)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
         "parameter '{}' ({}) expects shape {} but checkpoint tensor '{}' is {}", name_, param_kind_name(kind_),
         shape_str(shape_), source, full.str());
  write_region(-1, 0, 0, full, source);
}

void Parameter::load_column(const Tensor& full, int64_t dst_offset, int64_t size, int64_t src_index,
                            const std::string& source) {
  QLM_CHECK(output_dim >= 0 && output_dim < static_cast<int>(shape_.size()));
  const auto od = static_cast<size_t>(output_dim);
  int64_t dst = dst_offset, len = size;
  if (packed_dim == output_dim && !packed_factor.is_one()) {
    if (!packed_factor.divides(size) || !packed_factor.divides(dst_offset))
      fail("loader.packed_split", {.file = {}, .tensor = source, .layer = {}},
           "use a tensor-parallel size that keeps every output slice a multiple of the packing",
           "parameter '{}': output slice of {} at offset {} is not a multiple of {} for {}-bit packing", name_,
           size, dst_offset, packing_granule(packed_factor), field_bits(packed_factor));
    dst = dst_offset * packed_factor.den / packed_factor.num;
    len = size * packed_factor.den / packed_factor.num;
  } else if (kind_ == ParamKind::BlockScale) {
    QLM_CHECK(block_n > 0);
    if (src_index > 0 && (src_index * size) % block_n != 0)
      fail("loader.block_split", {.file = {}, .tensor = source, .layer = {}},
           "use a tensor-parallel size that splits the output dimension on block boundaries",
           "parameter '{}': a {}-wide scale block straddles tensor-parallel ranks (rank slice starts at output "
           "{}, not a multiple of {})",
           name_, block_n, src_index * size, block_n);
    dst = (dst_offset + block_n - 1) / block_n;
    len = (size + block_n - 1) / block_n;
  }
  const int64_t src_start = src_index * len;
  bool fits = full.dim() == static_cast<int64_t>(shape_.size()) && src_start + len <= full.size(output_dim) &&
              dst + len <= shape_[od];
  for (size_t d = 0; fits && d < shape_.size(); ++d)
    if (d != od && full.shape()[d] != shape_[d]) fits = false;
  if (!fits)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
         "parameter '{}' ({}, shape {}) takes columns [{}, {}) along dim {} from [{}, {}) of checkpoint tensor "
         "'{}' {}, which does not fit",
         name_, param_kind_name(kind_), shape_str(shape_), dst, dst + len, output_dim, src_start, src_start + len,
         source, full.str());
  write_region(output_dim, dst, dst + len, full.narrow(output_dim, src_start, len), source);
}

void Parameter::load_row(const Tensor& full, int tp_rank, int tp_size, const std::string& source) {
  QLM_CHECK(input_dim >= 0 && input_dim < static_cast<int>(shape_.size()));
  const auto id = static_cast<size_t>(input_dim);
  const int64_t shard = shape_[id];
  bool fits = full.dim() == static_cast<int64_t>(shape_.size()) && full.size(input_dim) == shard * tp_size;
  for (size_t d = 0; fits && d < shape_.size(); ++d)
    if (d != id && full.shape()[d] != shape_[d]) fits = false;
  if (!fits)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
         "parameter '{}' ({}) expects {} per rank along dim {} x {} ranks = shape {} but checkpoint tensor '{}' "
         "is {}",
         name_, param_kind_name(kind_), shard, input_dim, tp_size,
         [&] {
           Shape s = shape_;
           s[id] = shard * tp_size;
           return shape_str(s);
         }(),
         source, full.str());
  write_region(-1, 0, 0, full.narrow(input_dim, tp_rank * shard, shard), source);
}

void Parameter::load_scalar_slot(const Tensor& full, int slot, const std::string& source) {
  if (full.numel() != 1)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
         "parameter '{}' (per-tensor scale) expects one scalar (shape [] or [1]) per part but checkpoint tensor "
         "'{}' is {}",
         name_, source, full.str());
  if (shape_.size() != 1 || slot < 0 || slot >= shape_[0])
    fail("loader.shard_id", {.file = {}, .tensor = source, .layer = {}}, "",
         "parameter '{}' of shape {} has no per-tensor slot {}", name_, shape_str(shape_), slot);
  write_region(0, slot, slot + 1, full.contiguous().view({1}), source);
}

void Parameter::load_part_slot(const Tensor& full, int slot, const std::string& source) {
  Shape row(shape_.begin() + (shape_.empty() ? 0 : 1), shape_.end());
  if (shape_.empty() || full.shape() != row)
    fail("loader.shape", {.file = {}, .tensor = source, .layer = {}}, kShapeRemedy,
         "parameter '{}' {} holds one {} per part but checkpoint tensor '{}' is {}", name_, shape_str(shape_),
         shape_str(row), source, full.str());
  if (slot < 0 || slot >= shape_[0])
    fail("loader.shard_id", {.file = {}, .tensor = source, .layer = {}}, "",
         "parameter '{}' of shape {} has no part slot {}", name_, shape_str(shape_), slot);
  Shape one = shape_;
  one[0] = 1;
  write_region(0, slot, slot + 1, full.contiguous().view(one), source);
}

bool Parameter::fully_written() const {
  if (shape_numel(shape_) == 0) return true;
  std::vector<Box> boxes;
  for (const Range& r : written_) boxes.push_back(box_of(shape_, r.dim, r.begin, r.end));
  return uncovered_cells(shape_, boxes).empty();
}

std::string Parameter::unwritten_description() const {
  if (written_.empty()) return fmt::format("'{}' {}{}: nothing written", name_, dtype_name(dtype_), shape_str(shape_));
  std::vector<Box> boxes;
  for (const Range& r : written_) boxes.push_back(box_of(shape_, r.dim, r.begin, r.end));
  std::vector<Box> gaps = uncovered_cells(shape_, boxes);
  std::string s;
  for (size_t i = 0; i < gaps.size() && i < 8; ++i) s += (i ? ", " : "") + box_str(gaps[i]);
  if (gaps.size() > 8) s += fmt::format(", ... ({} regions)", gaps.size());
  return fmt::format("'{}' {}{}: unwritten {}", name_, dtype_name(dtype_), shape_str(shape_), s);
}

}  // namespace qlm
