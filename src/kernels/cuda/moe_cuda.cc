// `cuda_grouped`: the fused-MoE kernel on CUDA. Every step stays on the device's qlm stream:
//   1. router: softmax top-k (renormalised or not) per token (launch_moe_route);
//   2. grouping: counts per expert, prefix sums, the permutation of slots into expert order
//      (launch_moe_align), rows gathered in that order;
//   3. experts: WNA16 experts (GPTQ / AWQ / compressed-tensors, 2/3/4/8-bit, zero points, act-order)
//      with at most kGroupedRowsPerExpert rows per expert on average run grouped: one launch for the
//      w13 GEMM of all experts, one for SiLU·mul (gathered into w2's row order), one for the w2 GEMM
//      (moe_wna16_kernels.h), each block finding its expert and rows from the device-side offsets,
//      so nothing waits for the host. Every other case copies the expert offsets to the host once
//      and loops over the active experts over their contiguous rows: WNA16 experts with many rows
//      (or bit widths that differ between experts) through run_wna16_linear on the kernel's own
//      copy of their weights (dequantize + cuBLAS above a few rows; the experts' projections build
//      no kernel, so the weights are held once), unquantized, FP8, INT8 and mixed experts on their
//      own CUDA linear kernels;
//   4. combine: y[t] = sum_j w[t, j] * out[row of slot (t, j)], in F32, per token (deterministic).
#ifdef QLM_WITH_CUDA
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/moe_wna16_kernels.h"
#include "kernels/cuda/wna16_device.h"
#include "kernels/moe_kernel.h"
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/cuda/elem_type.h"
#include "runtime/ops/cuda/moe_launch.h"

namespace qlm {
namespace {

// WNA16 experts run grouped up to this many rows (slots) per expert on average.
constexpr int64_t kGroupedRowsPerExpert = 32;

std::optional<std::string> can_implement(const MoEKernelConfig& c) {
  if (c.device.type != DeviceType::CUDA) return "runs on CUDA only";
  if (c.capability < 75)
    return fmt::format("needs compute capability >= 75 (the oldest GPU CUDA 13 supports); the device has {}",
                       c.capability);
  if (c.act_dtype != DType::F32 && c.act_dtype != DType::F16 && c.act_dtype != DType::BF16)
    return fmt::format("activation dtype {} is not F32, F16 or BF16", dtype_name(c.act_dtype));
  if (c.act_dtype == DType::BF16 && c.capability < 80)
    return fmt::format("BF16 activations need compute capability >= 8.0; the device has {}", c.capability);
  if (c.num_experts > ops::cu::kMoeMaxExperts)
    return fmt::format("{} experts; the device router takes at most {}", c.num_experts, ops::cu::kMoeMaxExperts);
  if (c.top_k > ops::cu::kMoeMaxTopK)
    return fmt::format("top-k {}; the device router takes at most {}", c.top_k, ops::cu::kMoeMaxTopK);
  if (c.local_experts != c.num_experts)
    return fmt::format("holds {} of {} experts; expert parallelism is not supported (every rank holds every expert)",
                       c.local_experts, c.num_experts);
  return std::nullopt;
}

// One projection (w13 or w2) of every expert in the cuda_wna16 layout (the only copy of the weights
// on the device), with the device table of views for the grouped launch when every expert has the
// same bit width.
struct GroupedProjection {
  std::vector<Wna16DeviceLayout> experts;
  Tensor table;  // Wna16DeviceWeights[E] on the device (bytes); undefined when the widths differ
  int bits = 0;
  int64_t N = 0, N_pad = 0, max_rows = 0, max_chunks = 0;
};

GroupedProjection group_projection(const std::vector<const WNA16Weights*>& weights, Device device) {
  GroupedProjection g;
  std::vector<uint8_t> bytes(weights.size() * sizeof(cuda::Wna16DeviceWeights));
  bool same_bits = true;
  for (size_t e = 0; e < weights.size(); ++e) {
    g.experts.push_back(upload_wna16_layout(pack_cuda_wna16(*weights[e]), device));
    const cuda::Wna16DeviceWeights& v = g.experts.back().view;
    if (e == 0) g.bits = v.bits, g.N = v.N, g.N_pad = v.N_pad;
    QLM_CHECK(v.N == g.N && v.N_pad == g.N_pad);
    same_bits = same_bits && v.bits == g.bits;
    g.max_rows = std::max(g.max_rows, v.rows);
    g.max_chunks = std::max(g.max_chunks, v.chunks);
    std::memcpy(bytes.data() + e * sizeof(v), &v, sizeof(v));
  }
  if (same_bits) g.table = Tensor::from_vector(bytes, {static_cast<int64_t>(bytes.size())}).to_device(device);
  return g;
}

// Split-K of a grouped GEMM: about 4 blocks per SM over the column tiles and the expected row tiles,
// every warp at least 2 chunks; returns {splits, chunks per warp}.
std::pair<int, int64_t> plan_splits(const GroupedProjection& p, int64_t tiles, int sm_count) {
  const int64_t col_tiles = (p.N_pad + cuda::kGemvColumns - 1) / cuda::kGemvColumns;
  const int64_t target = std::max(1, sm_count) * int64_t{4};
  const int64_t max_splits = std::max<int64_t>(1, p.max_chunks / (cuda::kGemvWarps * 2));
  int64_t splits =
      std::clamp<int64_t>((target + col_tiles * tiles - 1) / (col_tiles * tiles), 1, std::min<int64_t>(max_splits, 64));
  const int64_t cpw = (p.max_chunks + splits * cuda::kGemvWarps - 1) / (splits * cuda::kGemvWarps);
  splits = (p.max_chunks + cpw * cuda::kGemvWarps - 1) / (cpw * cuda::kGemvWarps);
  return {static_cast<int>(splits), std::max<int64_t>(cpw, 1)};
}

class CudaGroupedMoE final : public MoEKernel {
 public:
  explicit CudaGroupedMoE(const MoEKernelConfig& cfg) : cfg_(cfg) {}
  std::string name() const override { return "cuda_grouped"; }

  // WNA16 experts (every expert weight-only integer) run from this kernel's own copy at every
  // batch size: grouped, or per expert through run_wna16_linear.
  bool runs_wna16_experts() const override { return true; }

  void prepare(std::vector<MoEExpertOps> experts) override {
    QLM_CHECK(static_cast<int64_t>(experts.size()) == cfg_.num_experts);
    for (size_t i = 0; i < experts.size(); ++i) QLM_CHECK(experts[i].id == static_cast<int64_t>(i));
    own_wna16_ =
        std::all_of(experts.begin(), experts.end(), [](const MoEExpertOps& e) { return e.w13_wna16 && e.w2_wna16; });
    if (own_wna16_) {
      std::vector<const WNA16Weights*> w13, w2;
      for (const MoEExpertOps& e : experts) {
        w13.push_back(e.w13_wna16);
        w2.push_back(e.w2_wna16);
      }
      w13_ = group_projection(w13, cfg_.device);
      w2_ = group_projection(w2, cfg_.device);
      grouped_ = w13_.table.defined() && w2_.table.defined();
    }
    for (MoEExpertOps& e : experts) e.w13_wna16 = e.w2_wna16 = nullptr;  // valid during prepare() only
    experts_ = std::move(experts);
  }

  void run(const Tensor& x, const MoERouting&, Tensor&) const override {
    fail("kernel.device", {}, "pass the activations on the layer's CUDA device",
         "cuda_grouped runs on {} and got input on {}", cfg_.device.str(), x.device().str());
  }

  std::string device_host_wait(int64_t tokens) const override {
    const int64_t E = cfg_.num_experts, R = tokens * cfg_.top_k;
    if (!own_wna16_) return "its experts are not all weight-only integer: they run one by one after the expert counts are read on the host";
    if (!grouped_) return "its experts differ in bit width: they run one by one after the expert counts are read on the host";
    if (R > kGroupedRowsPerExpert * E || (R + tile_m_for(R) - 1) / tile_m_for(R) + E > 65535)
      return fmt::format("{} routed rows for {} experts run one by one after the expert counts are read on the host", R, E);
    return "";
  }

  Tensor run_device(const Tensor& x, const Tensor& logits) const override {
    const int64_t T = x.size(0), H = cfg_.hidden_size, E = cfg_.num_experts, k = cfg_.top_k, R = T * k;
    QLM_CHECK(x.dim() == 2 && x.size(1) == H && x.dtype() == cfg_.act_dtype && x.device() == cfg_.device &&
              x.is_contiguous());
    QLM_CHECK(logits.dim() == 2 && logits.size(0) == T && logits.size(1) == E && logits.device() == cfg_.device &&
              logits.is_contiguous());
    const Device dev = cfg_.device;
    cuda::Context& ctx = cuda::context(dev.index);
    Tensor y = Tensor::empty({T, H}, DType::F32, dev);
    if (T == 0) return y;
    Tensor ids = Tensor::empty({R}, DType::I32, dev), weights = Tensor::empty({R}, DType::F32, dev);
    QLM_CUDA_CHECK(ops::cu::launch_moe_route(logits.raw_data(), ops::cu::elem_type(logits.dtype()), T, E, k,
                                             cfg_.renormalize, ids.data<int32_t>(), weights.data<float>(), ctx.stream));
    Routed r{.offsets = Tensor::empty({E + 1}, DType::I32, dev),
             .tile_offsets = Tensor::empty({E + 1}, DType::I32, dev),
             .row_token = Tensor::empty({R}, DType::I32, dev),
             .slot_row = Tensor::empty({R}, DType::I32, dev),
             .weights = weights,
             .tile_m = 1};
    const bool grouped = grouped_ && R <= kGroupedRowsPerExpert * E;
    if (grouped) r.tile_m = tile_m_for(R);
    QLM_CUDA_CHECK(ops::cu::launch_moe_align(ids.data<int32_t>(), R, k, E, r.tile_m, r.offsets.data<int32_t>(),
                                             r.tile_offsets.data<int32_t>(), r.row_token.data<int32_t>(),
                                             r.slot_row.data<int32_t>(), ctx.stream));
    if (grouped && (R + r.tile_m - 1) / r.tile_m + E <= 65535) {
      run_grouped(x, r, y, ctx);
    } else {
      run_per_expert(x, r, y, ctx);
    }
    return y;
  }

 private:
  // Rows per tile of the grouped launch for R routed rows: about the rows one expert gets.
  int64_t tile_m_for(int64_t R) const {
    const int64_t avg = (R + cfg_.num_experts - 1) / cfg_.num_experts;
    return avg <= 1 ? 1 : avg <= 2 ? 2 : avg <= 4 ? 4 : 8;
  }

  // The routing on the device (launch_moe_align's outputs).
  struct Routed {
    Tensor offsets, tile_offsets, row_token, slot_row, weights;
    int64_t tile_m = 1;
  };

  void run_grouped(const Tensor& x, const Routed& r, Tensor& y, cuda::Context& ctx) const {
    const int64_t T = x.size(0), H = cfg_.hidden_size, E = cfg_.num_experts, k = cfg_.top_k, R = T * k;
    const int64_t I_p = cfg_.intermediate_per_partition;
    const Device dev = cfg_.device;
    const int64_t max_tiles = (R + r.tile_m - 1) / r.tile_m + E;
    const int64_t tiles = (R + r.tile_m - 1) / r.tile_m;  // expected: one partial tile per active expert more
    auto experts = [&](const GroupedProjection& p) {
      return cuda::MoeWna16Experts{.table = reinterpret_cast<const cuda::Wna16DeviceWeights*>(p.table.raw_data()),
                                   .num_experts = static_cast<int>(E),
                                   .offsets = r.offsets.data<int32_t>(),
                                   .tile_offsets = r.tile_offsets.data<int32_t>(),
                                   .rows_total = R,
                                   .tile_m = static_cast<int>(r.tile_m)};
    };
    const cuda::MoeWna16Experts e13 = experts(w13_), e2 = experts(w2_);
    QLM_CHECK(w13_.N == 2 * I_p && w2_.N == H);
    Tensor xf = Tensor::empty({R, w13_.max_rows}, DType::F32, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_gather(x.raw_data(), wna16_act(cfg_.act_dtype), H,
                                                 r.row_token.data<int32_t>(), e13, w13_.max_rows, xf.data<float>(),
                                                 ctx.stream));
    const auto [s13, cpw13] = plan_splits(w13_, tiles, ctx.sm_count);
    Tensor p13 = Tensor::empty({s13, R, 2 * I_p}, DType::F32, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_gemm(e13, w13_.bits, w13_.N, w13_.N_pad, max_tiles, xf.data<float>(),
                                               w13_.max_rows, s13, cpw13, p13.data<float>(), ctx.stream));
    Tensor af = Tensor::empty({R, w2_.max_rows}, DType::F32, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_silu_gather(p13.data<float>(), s13, I_p, e2, w2_.max_rows, af.data<float>(),
                                                      ctx.stream));
    const auto [s2, cpw2] = plan_splits(w2_, tiles, ctx.sm_count);
    Tensor p2 = Tensor::empty({s2, R, H}, DType::F32, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_gemm(e2, w2_.bits, w2_.N, w2_.N_pad, max_tiles, af.data<float>(),
                                               w2_.max_rows, s2, cpw2, p2.data<float>(), ctx.stream));
    QLM_CUDA_CHECK(ops::cu::launch_moe_combine(p2.data<float>(), ops::cu::ElemType::F32, s2, R,
                                               r.slot_row.data<int32_t>(), r.weights.data<float>(), T, k, H,
                                               y.data<float>(), ctx.stream));
  }

  void run_per_expert(const Tensor& x, const Routed& r, Tensor& y, cuda::Context& ctx) const {
    const int64_t T = x.size(0), H = cfg_.hidden_size, E = cfg_.num_experts, k = cfg_.top_k, R = T * k;
    const Device dev = cfg_.device;
    const DType act = cfg_.act_dtype;
    const ops::cu::ElemType et = ops::cu::elem_type(act);
    Tensor xs = Tensor::empty({R, H}, act, dev);
    QLM_CUDA_CHECK(ops::cu::launch_moe_gather_rows(x.raw_data(), et, r.row_token.data<int32_t>(), R, H, xs.raw_data(),
                                                   ctx.stream));
    Tensor out = Tensor::empty({R, H}, act, dev);
    const Tensor offsets = r.offsets.to_device(Device::cpu());  // the one wait for the device
    const int32_t* off = offsets.data<int32_t>();
    const size_t row_bytes = static_cast<size_t>(H) * dtype_size(act);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = off[e + 1] - off[e];
      if (n == 0) continue;
      Tensor xe = xs.narrow(0, off[e], n);
      if ((static_cast<size_t>(off[e]) * row_bytes) % 16 != 0) xe = xe.clone();  // kernels take 16-byte rows
      const Tensor o = run_expert(e, xe);
      QLM_CHECK(o.dtype() == act && o.size(0) == n && o.size(1) == H && o.is_contiguous());
      QLM_CUDA_CHECK(cudaMemcpyAsync(out.raw_data() + off[e] * row_bytes, o.raw_data(), n * row_bytes,
                                     cudaMemcpyDeviceToDevice, ctx.stream));
    }
    QLM_CUDA_CHECK(ops::cu::launch_moe_combine(out.raw_data(), et, 1, R, r.slot_row.data<int32_t>(),
                                               r.weights.data<float>(), T, k, H, y.data<float>(), ctx.stream));
  }

  // Expert e on its n rows xe [n, H]: SiLU(gate)·up then down, [n, H] in the act dtype.
  Tensor run_expert(int64_t e, const Tensor& xe) const {
    if (!own_wna16_) {
      const MoEExpertOps& ex = experts_[static_cast<size_t>(e)];
      return ex.w2(ops::cu::silu_and_mul(ex.w13(xe)));
    }
    const int64_t n = xe.size(0);
    const cuda::Wna16DeviceWeights& w13 = w13_.experts[static_cast<size_t>(e)].view;
    const cuda::Wna16DeviceWeights& w2 = w2_.experts[static_cast<size_t>(e)].view;
    Tensor h = Tensor::empty({n, w13.N}, cfg_.act_dtype, cfg_.device);
    run_wna16_linear(w13, cfg_.act_dtype, xe, h, nullptr, cfg_.device);
    const Tensor a = ops::cu::silu_and_mul(h);
    Tensor o = Tensor::empty({n, w2.N}, cfg_.act_dtype, cfg_.device);
    run_wna16_linear(w2, cfg_.act_dtype, a, o, nullptr, cfg_.device);
    return o;
  }

  MoEKernelConfig cfg_;
  std::vector<MoEExpertOps> experts_;
  bool own_wna16_ = false;  // WNA16 experts: w13_ / w2_ hold their only copy on the device
  bool grouped_ = false;    // ... with one bit width per projection: the grouped launch can run them
  GroupedProjection w13_, w2_;
};

const MoEKernelRegistrar kCudaGrouped{{
    .name = "cuda_grouped",
    .backend = "cuda",
    .device = DeviceType::CUDA,
    .priority = 100,
    .can_implement = can_implement,
    .create = [](const MoEKernelConfig& c) -> std::unique_ptr<MoEKernel> {
      return std::make_unique<CudaGroupedMoE>(c);
    },
}};

}  // namespace
}  // namespace qlm
#endif
