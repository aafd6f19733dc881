#include "quant/wna16_method.h"

#include <cmath>
#include <cstdio>
#include <numeric>

namespace qlm {

std::string WNA16Scheme::describe() const {
  std::string s = weight_type().name();
  s += group_size < 0 ? " channelwise" : fmt::format(" g{}", group_size);
  if (act_order) s += " act-order";
  return s;
}

namespace {

// Tensor-parallel sizes up to 64 for which every rank's K slice is a whole number of groups.
std::string working_tp_sizes(int64_t K, int64_t group_rows) {
  std::string out;
  for (int64_t t = 1; t <= 64; t *= 2)
    if (K % t == 0 && (K / t) % group_rows == 0) out += (out.empty() ? "" : ", ") + std::to_string(t);
  return out.empty() ? "none" : out;
}

}  // namespace

WNA16LinearMethod::WNA16LinearMethod(std::string format, WNA16Scheme scheme)
    : format_(std::move(format)), scheme_(scheme) {}

std::string WNA16LinearMethod::describe() const {
  std::string s = fmt::format("{} {}", format_, scheme_.describe());
  if (!kernel_name_.empty()) s += fmt::format(" [{}]", kernel_name_);
  return s;
}

void WNA16LinearMethod::create_weights(LinearLayer& layer, int64_t K_p,
                                       const std::vector<int64_t>& output_partition_sizes, int64_t K, int64_t N,
                                       DType params_dtype) {
  WNA16Geometry& g = geo_;
  g.K = K;
  g.N = N;
  g.K_p = K_p;
  g.N_p = std::accumulate(output_partition_sizes.begin(), output_partition_sizes.end(), int64_t{0});
  g.output_partition_sizes = output_partition_sizes;
  g.row_parallel = K_p != K;
  g.tp_rank = layer.tp().rank;
  g.tp_size = layer.tp().size;
  g.replicate_scales = scheme_.act_order || (scheme_.group_size < 0 && g.row_parallel);
  g.group_rows = scheme_.group_size < 0 ? K : scheme_.group_size;
  const std::string& name = layer.prefix();

  if (scheme_.group_size > 0 && scheme_.group_size > K)
    fail("quant.group_size", {.file = {}, .tensor = {}, .layer = name}, "the checkpoint's group_size must not exceed the layer's in_features",
         "group_size {} is larger than in_features K = {} of layer {}", scheme_.group_size, K, name);
  if (K % g.group_rows != 0)
    fail("quant.group_size", {.file = {}, .tensor = {}, .layer = name},
         "check group_size in the quantization config; groups must tile the input features exactly",
         "group_size {} does not divide in_features K = {} of layer {} ({} groups would leave {} rows over)",
         g.group_rows, K, name, K / g.group_rows, K % g.group_rows);
  if (!g.replicate_scales && K_p % g.group_rows != 0)
    fail("quant.partition", {.file = {}, .tensor = {}, .layer = name},
         fmt::format("use a smaller tensor-parallel size (sizes that work for this layer: {})",
                     working_tp_sizes(K, g.group_rows)),
         "this rank's in_features K_p = {} (K = {}, tensor-parallel size {}) is not a multiple of "
         "group_size {}",
         K_p, K, g.tp_size, g.group_rows);
  g.scale_rows = (g.replicate_scales ? K : K_p) / g.group_rows;
  check_partition(layer, g);
  declare_params(layer, g);

  const QuantContext& ctx = layer.quant_context();
  cfg_ = MPLinearLayerConfig{};
  cfg_.K = K;
  cfg_.N = N;
  cfg_.K_p = K_p;
  cfg_.N_p = g.N_p;
  cfg_.weight_type = scheme_.weight_type();
  cfg_.zero_points = !scheme_.symmetric;
  cfg_.has_g_idx = scheme_.act_order;
  cfg_.group_size = scheme_.group_size;
  cfg_.act_dtype = ctx.act_dtype;
  cfg_.device = ctx.device;
  cfg_.capability = ctx.capability;
  (void)params_dtype;  // scales are declared F32; f16/bf16 checkpoint scales widen exactly on load
  auto [entry, selection] = MPKernelRegistry::instance().select(cfg_, ctx.device.type, ctx.kernels.backend_for(format_),
                                                                "mixed-precision linear", name);
  layer.kernel_selection = selection;
  kernel_name_ = entry->name;
}

void WNA16LinearMethod::process_weights_after_loading(LinearLayer& layer) {
  WNA16Weights w = to_standard_form(layer, geo_);
  attach_g_idx(layer, w);
  validate(layer, w);
  if (standard_only_) {
    kept_ = std::move(w);
    return;
  }
  const auto* entry = MPKernelRegistry::instance().find(kernel_name_);
  QLM_CHECK(entry != nullptr);
  kernel_ = entry->create(cfg_);
  if (keep_) {
    WNA16Weights copy = w;
    for (Tensor* t : {&copy.qweight, &copy.scales, &copy.zeros, &copy.g_idx})
      if (t->defined()) *t = t->clone();
    kept_ = std::move(copy);
  }
  kernel_->prepare(std::move(w));
}

// Under act-order the g_idx is part of the standard form. Otherwise a g_idx in the checkpoint must
// be the plain k / group_size (a non-trivial one means the config's desc_act/actorder is wrong).
void WNA16LinearMethod::attach_g_idx(LinearLayer& layer, WNA16Weights& w) const {
  const char* pname = g_idx_param();
  Parameter* p = pname ? layer.find_param(pname) : nullptr;
  if (p == nullptr || !p->written_at_all()) return;
  if (scheme_.act_order) {
    w.g_idx = p->data().contiguous();
    return;
  }
  const Tensor idx = p->data().contiguous();
  auto v = idx.span<int32_t>();
  for (int64_t k = 0; k < geo_.K_p; ++k) {
    const int64_t want = (geo_.k_offset() + k) / geo_.group_rows;
    if (v[k] != want)
      fail("weights.g_idx", {.file = {}, .tensor = pname, .layer = layer.prefix()},
           "the checkpoint looks act-order quantized: set desc_act (GPTQ) / actorder (compressed-tensors) to match",
           "{}[{}] = {} but the config declares no act-order, which requires g_idx[k] = k / group_size = {}", pname,
           geo_.k_offset() + k, v[k], want);
  }
}

void WNA16LinearMethod::validate(const LinearLayer& layer, const WNA16Weights& w) {
  const WNA16Geometry& g = geo_;
  const std::string& name = layer.prefix();
  const int bits = scheme_.bits;
  QLM_CHECK(w.weight_type == scheme_.weight_type());
  QLM_CHECK(w.K == g.K_p && w.N == g.N_p);
  QLM_CHECK(w.qweight.dtype() == DType::I32 && w.qweight.shape() == Shape({(g.K_p * bits + 31) / 32, g.N_p}));
  QLM_CHECK(w.scales.dtype() == DType::F32 && w.scales.shape() == Shape({g.scale_rows, g.N_p}));
  QLM_CHECK(scheme_.symmetric != w.zeros.defined());
  if (w.zeros.defined()) QLM_CHECK(w.zeros.dtype() == DType::I32 && w.zeros.shape() == w.scales.shape());
  QLM_CHECK(scheme_.act_order == w.g_idx.defined());

  if (int64_t zeros = check_scales(w.scales, name, "scales"); zeros > 0) {
    warnings_.push_back(fmt::format("layer {}: {} of {} weight scales are zero (those weights dequantize to 0)", name,
                                    zeros, w.scales.numel()));
    fmt::print(stderr, "warning: {}\n", warnings_.back());
  }
  if (w.g_idx.defined()) {
    QLM_CHECK(w.g_idx.dtype() == DType::I32 && w.g_idx.shape() == Shape({g.K_p}));
    const int64_t total_groups = g.K / g.group_rows;  // the scale table is replicated under act-order
    std::vector<int64_t> count(static_cast<size_t>(total_groups), 0);
    auto idx = w.g_idx.span<int32_t>();
    for (int64_t k = 0; k < g.K_p; ++k) {
      if (idx[k] < 0 || idx[k] >= total_groups)
        fail("weights.g_idx", {.file = {}, .tensor = "g_idx", .layer = name},
             "the checkpoint's g_idx does not match its group_size / in_features; re-export the checkpoint",
             "g_idx[{}] = {} is out of range: expected a group in [0, {}) (K = {}, group_size = {})",
             g.k_offset() + k, idx[k], total_groups, g.K, g.group_rows);
      ++count[static_cast<size_t>(idx[k])];
    }
    for (int64_t grp = 0; grp < total_groups; ++grp) {
      int64_t c = count[static_cast<size_t>(grp)];
      // A rank holding all of K sees every group exactly group_size times (a permutation of
      // grouped rows); a K slice can only be checked for excess.
      if (c > g.group_rows || (!g.row_parallel && c != g.group_rows))
        fail("weights.g_idx", {.file = {}, .tensor = "g_idx", .layer = name},
             "the act-order permutation in g_idx is corrupt; re-export the checkpoint",
             "group {} appears {} times in g_idx{}; act-order requires each group exactly group_size = {} times",
             grp, c, g.row_parallel ? " (this rank's slice)" : "", g.group_rows);
    }
  }
}

Tensor WNA16LinearMethod::apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) {
  if (standard_only_)
    fail("quant.moe_expert", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         "run the fused-MoE layer that holds this expert, not the projection on its own",
         "layer {} is an expert projection whose weights only its fused-MoE kernel holds; it has no linear kernel",
         layer.prefix());
  if (!kernel_)
    fail("quant.not_finalized", {.file = {}, .tensor = {}, .layer = layer.prefix()},
         "call finalize() after loading every tensor", "layer {} ran forward before process_weights_after_loading",
         layer.prefix());
  Tensor in = x.contiguous();
  Tensor y = allocate_linear_output(in, geo_.N_p);
  kernel_->run(in, y, bias);
  return y;
}

std::vector<uint8_t> transpose_codes(const std::vector<uint8_t>& codes, int64_t rows, int64_t cols) {
  std::vector<uint8_t> t(codes.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = codes[static_cast<size_t>(r * cols + c)];
  return t;
}

Tensor codes_to_i32(const std::vector<uint8_t>& codes, int64_t rows, int64_t cols, int offset) {
  Tensor t = Tensor::empty({rows, cols}, DType::I32);
  auto out = t.span<int32_t>();
  for (size_t i = 0; i < codes.size(); ++i) out[i] = static_cast<int32_t>(codes[i]) + offset;
  return t;
}

Tensor transpose_f32(const Tensor& t) { return t.transpose().to(DType::F32); }

int64_t check_scales(const Tensor& scales_f32, const std::string& layer, const std::string& tensor) {
  const Tensor s = scales_f32.contiguous();
  const int64_t cols = s.dim() == 2 ? s.size(1) : 1;
  int64_t zeros = 0;
  auto v = s.span<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || v[i] < 0)
      fail("weights.scale", {.file = {}, .tensor = tensor, .layer = layer},
           "the checkpoint is corrupt (scales must be finite and non-negative); re-download or re-export it",
           "{} scale at [{}, {}] is {}; weight scales must be finite and >= 0", tensor, i / cols, i % cols, v[i]);
    if (v[i] == 0) ++zeros;
  }
  return zeros;
}

void check_zero_points(const Tensor& zeros_i32, int bits, const std::string& layer, const std::string& tensor,
                       const std::string& convention) {
  const Tensor z = zeros_i32.contiguous();
  const int64_t cols = z.size(1);
  const int32_t max_code = (1 << bits) - 1;
  auto v = z.span<int32_t>();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] > max_code)
      fail("weights.zero_point", {.file = {}, .tensor = tensor, .layer = layer},
           "the zero points do not fit the declared bits; check bits and checkpoint_format (gptq vs gptq_v2)",
           "zero point of group {} column {} is {} ({}); {}-bit zero points must lie in [0, {}]", i / cols, i % cols,
           v[i], convention, bits, max_code);
}

}  // namespace qlm
