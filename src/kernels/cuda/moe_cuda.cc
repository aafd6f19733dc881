// `cuda_grouped`: the fused-MoE kernel on CUDA. Every step stays on the device's qlm stream:
//   1. router: softmax top-k (renormalised or not) per token (launch_moe_route);
//   2. grouping: counts per expert, prefix sums, the permutation of slots into expert order
//      (launch_moe_align; up to kMoeRouteAlignMaxTokens tokens, steps 1 and 2 are one launch:
//      launch_moe_route_align; at 1-4 tokens with F16 / BF16 activations the router's GEMV too, from its weight:
//      run_device_router, launch_moe_router_route_align), rows gathered in that order;
//   3. experts: WNA16 experts (GPTQ / AWQ / compressed-tensors, 2/3/4/8-bit, zero points, act-order)
//      with few rows per expert on average run grouped: one launch for the w13 GEMM of all experts,
//      one for SiLU·mul (gathered into w2's row order), one for the w2 GEMM (moe_wna16_kernels.h),
//      each block finding its expert and rows from the device-side offsets, so nothing waits for the
//      host. The GEMMs run on tensor cores (4-bit experts with groups of multiples of 32 rows, BF16 /
//      F16 activations: up to kMoeMmaGroupedRowsPerExpert rows per expert) or as a CUDA-core GEMV
//      (every other WNA16 expert: up to kGroupedRowsPerExpert). Every other case copies the expert offsets to the host
//      once and loops over the active experts over their contiguous rows: WNA16 experts with many rows (or bit widths
//      that differ between experts) through run_wna16_linear on the kernel's own copy of their weights (dequantize +
//      cuBLAS above a few rows; the experts' projections build no kernel, so the weights are held once), unquantized,
//      FP8, INT8 and mixed experts on their own CUDA linear kernels;
//   4. combine: y[t] = sum_j w[t, j] * out[row of slot (t, j)], in F32, per token (deterministic).
// Every kernel of these steps is launched with programmatic dependent launch (kernels/cuda/pdl.cuh) and waits for its
// predecessor before its first access to memory, so each one's launch and block start-up overlap the previous one.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/env_switch.h"
#include "kernels/cuda/moe_cuda_options.h"

namespace qlm {
namespace {

// WNA16 experts run grouped on the tensor-core kernel up to this many rows per expert on average (its tiles are up to
// 32 rows; above 32 an expert's weights are read once per tile).
constexpr int64_t kMoeMmaGroupedRowsPerExpert = 64;

std::atomic<int> g_grouped_kernel{-1};  // set_moe_wna16_grouped; -1: not set
std::atomic<int64_t> g_mma_max_rows{0};

MoeWna16Grouped env_grouped_kernel() {
  const char* e = std::getenv("QLM_MOE_WNA16");
  if (e && !std::strcmp(e, "gemv")) return MoeWna16Grouped::Gemv;
  if (e && !std::strcmp(e, "mma")) return MoeWna16Grouped::Mma;
  return MoeWna16Grouped::Auto;
}

}  // namespace

void set_moe_wna16_grouped(MoeWna16Grouped kernel) { g_grouped_kernel.store(static_cast<int>(kernel)); }

MoeWna16Grouped moe_wna16_grouped() {
  static const MoeWna16Grouped from_env = env_grouped_kernel();
  const int forced = g_grouped_kernel.load();
  return forced > 0 ? static_cast<MoeWna16Grouped>(forced) : from_env;
}

void set_moe_mma_max_rows(int64_t rows) { g_mma_max_rows.store(rows); }

int64_t moe_mma_max_rows() {
  static const int64_t from_env = std::max<int64_t>(0, env_int("QLM_MOE_MMA_MAX_ROWS", 0));
  const int64_t forced = g_mma_max_rows.load();
  return forced > 0 ? forced : from_env > 0 ? from_env : kMoeMmaGroupedRowsPerExpert;
}

}  // namespace qlm

#ifdef QLM_WITH_CUDA
#include <optional>
#include <string>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#include "kernels/cuda/moe_wna16_kernels.h"
#include "kernels/cuda/wna16_device.h"
#include "kernels/cuda/wna16_layout.h"
#include "kernels/moe_kernel.h"
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/cuda/elem_type.h"
#include "runtime/ops/cuda/moe_launch.h"

namespace qlm {
namespace {

// WNA16 experts run grouped on the CUDA-core GEMV up to this many rows (slots) per expert on average.
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
  bool groups_in_quads = true;  // every expert's (cuda_wna16_groups_in_quads): the tensor-core kernel can run it
};

GroupedProjection group_projection(const std::vector<const WNA16Weights*>& weights, Device device) {
  GroupedProjection g;
  std::vector<uint8_t> bytes(weights.size() * sizeof(cuda::Wna16DeviceWeights));
  bool same_bits = true;
  for (size_t e = 0; e < weights.size(); ++e) {
    const CudaWna16Layout layout = pack_cuda_wna16(*weights[e]);
    g.groups_in_quads = g.groups_in_quads && cuda_wna16_groups_in_quads(layout);
    g.experts.push_back(upload_wna16_layout(layout, device));
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

// The same for the tensor-core kernel: about 8 blocks (of 4 warps) per SM, every split at least 16 chunks (a multiple
// of 16: the kernel's loads in flight); returns {splits, chunks per split}.
std::pair<int, int64_t> plan_mma_splits(const GroupedProjection& p, int64_t tiles, int sm_count) {
  const int64_t col_blocks = cuda::moe_mma_column_blocks(p.N_pad);
  const int64_t target = std::max(1, sm_count) * int64_t{8};
  const int64_t max_splits = std::max<int64_t>(1, p.max_chunks / 16);
  const int64_t splits = std::clamp<int64_t>((target + col_blocks * tiles - 1) / (col_blocks * tiles), 1,
                                             std::min<int64_t>(max_splits, 64));
  const int64_t cps = ((p.max_chunks + splits - 1) / splits + 15) / 16 * 16;
  return {static_cast<int>((p.max_chunks + cps - 1) / cps), cps};
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
      mma_ok_ = grouped_ && cfg_.capability >= 80 && (cfg_.act_dtype == DType::BF16 || cfg_.act_dtype == DType::F16) &&
                w13_.bits == 4 && w2_.bits == 4 && w13_.groups_in_quads && w2_.groups_in_quads &&
                w13_.max_rows % 8 == 0 && w2_.max_rows % 8 == 0;
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
    if (!own_wna16_)
      return "its experts are not all weight-only integer: they run one by one after the expert counts are read on the "
             "host";
    if (!grouped_)
      return "its experts differ in bit width: they run one by one after the expert counts are read on the host";
    if (!plan(tokens).grouped)
      return fmt::format("{} routed rows for {} experts run one by one after the expert counts are read on the host", R,
                         E);
    return "";
  }

  std::string experts_path(int64_t tokens) const override {
    if (!own_wna16_) return "per expert";
    const GroupedPlan p = plan(tokens);
    if (!p.grouped) return "per expert, own WNA16 layout";
    if (p.mma) return fmt::format("grouped WNA16, tensor cores ({}-row tiles)", p.tile_m);
    return "grouped WNA16, CUDA-core GEMV";
  }

  Tensor run_device(const Tensor& x, const Tensor& logits) const override {
    const int64_t T = x.size(0), E = cfg_.num_experts;
    QLM_CHECK(logits.dim() == 2 && logits.size(0) == T && logits.size(1) == E && logits.device() == cfg_.device &&
              logits.is_contiguous());
    return route_and_run(x, [&](Tensor& ids, Routed& r, cudaStream_t stream) {
      const int64_t k = cfg_.top_k;
      const ops::cu::ElemType logits_type = ops::cu::elem_type(logits.dtype());
      static const bool route_align = env_switch_on("QLM_MOE_ROUTE_ALIGN");  // 0: two launches (A/B measurements)
      if (route_align && T <= ops::cu::kMoeRouteAlignMaxTokens) {            // one launch for both
        QLM_CUDA_CHECK(ops::cu::launch_moe_route_align(
            logits.raw_data(), logits_type, T, E, k, cfg_.renormalize, r.tile_m, ids.data<int32_t>(),
            r.weights.data<float>(), r.offsets.data<int32_t>(), r.tile_offsets.data<int32_t>(),
            r.row_token.data<int32_t>(), r.slot_row.data<int32_t>(), r.row_expert.data<int32_t>(),
            r.tile_expert.data<int32_t>(), stream));
      } else {
        QLM_CUDA_CHECK(ops::cu::launch_moe_route(logits.raw_data(), logits_type, T, E, k, cfg_.renormalize,
                                                 ids.data<int32_t>(), r.weights.data<float>(), stream));
        QLM_CUDA_CHECK(ops::cu::launch_moe_align(ids.data<int32_t>(), T * k, k, E, r.tile_m, r.offsets.data<int32_t>(),
                                                 r.tile_offsets.data<int32_t>(), r.row_token.data<int32_t>(),
                                                 r.slot_row.data<int32_t>(), r.row_expert.data<int32_t>(),
                                                 r.tile_expert.data<int32_t>(), stream));
      }
    });
  }

  // QLM_MOE_FUSED_ROUTER=0 keeps the router a linear layer of its own (A/B measurements).
  std::string router_fold_obstacle(int64_t tokens) const override {
    static const bool fused = env_switch_on("QLM_MOE_FUSED_ROUTER");
    if (!fused) return "QLM_MOE_FUSED_ROUTER=0";
    if (cfg_.act_dtype != DType::BF16 && cfg_.act_dtype != DType::F16)
      return fmt::format("{} activations: the fold takes F16 / BF16", dtype_name(cfg_.act_dtype));
    if (tokens < 1 || tokens > ops::cu::kMoeRouterMaxTokens)
      return fmt::format("{} tokens: the fold takes 1-{}", tokens, ops::cu::kMoeRouterMaxTokens);
    if (cfg_.hidden_size % 8 != 0)
      return fmt::format("hidden size {}: the fold takes multiples of 8", cfg_.hidden_size);
    if (!ops::cu::moe_router_route_align_ok(ops::cu::elem_type(cfg_.act_dtype), tokens, cfg_.hidden_size,
                                            cfg_.num_experts, cfg_.top_k))
      return "this GPU has no thread-block clusters (sm_90 and later)";
    return {};
  }

  Tensor run_device_router(const Tensor& x, const Tensor& router_weight) const override {
    const int64_t T = x.size(0);
    if (!routes_from_weight(T)) return MoEKernel::run_device_router(x, router_weight);
    QLM_CHECK(router_weight.dim() == 2 && router_weight.size(0) == cfg_.num_experts &&
              router_weight.size(1) == cfg_.hidden_size && router_weight.dtype() == cfg_.act_dtype &&
              router_weight.device() == cfg_.device && router_weight.is_contiguous());
    return route_and_run(x, [&](Tensor& ids, Routed& r, cudaStream_t stream) {
      ops::cu::MoeRouterRouteAlignArgs a;
      a.x = x.raw_data();
      a.w = router_weight.raw_data();
      a.type = ops::cu::elem_type(cfg_.act_dtype);
      a.tokens = T;
      a.hidden = cfg_.hidden_size;
      a.experts = cfg_.num_experts;
      a.top_k = cfg_.top_k;
      a.renormalize = cfg_.renormalize;
      a.tile_m = r.tile_m;
      a.ids = ids.data<int32_t>();
      a.weights = r.weights.data<float>();
      a.offsets = r.offsets.data<int32_t>();
      a.tile_offsets = r.tile_offsets.data<int32_t>();
      a.row_token = r.row_token.data<int32_t>();
      a.slot_row = r.slot_row.data<int32_t>();
      a.row_expert = r.row_expert.data<int32_t>();
      a.tile_expert = r.tile_expert.data<int32_t>();
      QLM_CUDA_CHECK(ops::cu::launch_moe_router_route_align(a, stream));
    });
  }

 private:
  struct GroupedPlan {
    bool grouped = false;  // one launch per projection for every expert (else: per expert)
    bool mma = false;      // ... on the tensor-core kernel (else: the CUDA-core GEMV)
    int64_t tile_m = 1;    // rows per tile
  };

  // How `tokens` tokens run: grouped while the experts get few rows on average (the GEMV up to
  // kGroupedRowsPerExpert, the tensor-core kernel up to moe_mma_max_rows()), with tiles of about the rows one
  // expert gets; the grid's tiles within 65535.
  GroupedPlan plan(int64_t tokens) const {
    const int64_t E = cfg_.num_experts, R = tokens * cfg_.top_k;
    if (!grouped_) return {};
    const bool mma = mma_ok_ && moe_wna16_grouped() != MoeWna16Grouped::Gemv;
    if (R > (mma ? moe_mma_max_rows() : kGroupedRowsPerExpert) * E) return {};
    const int64_t avg = (R + E - 1) / E;
    const int64_t tile_m = mma ? (avg <= 8    ? 8
                                  : avg <= 16 ? 16
                                              : 32)
                               : (avg <= 1   ? 1
                                  : avg <= 2 ? 2
                                  : avg <= 4 ? 4
                                             : 8);
    if (ops::cu::moe_max_tiles(R, E, tile_m) > 65535) return {};
    return {true, mma, tile_m};
  }

  // The routing on the device (launch_moe_align's outputs); tile_expert has max_tiles entries.
  struct Routed {
    Tensor offsets, tile_offsets, row_token, slot_row, row_expert, tile_expert, weights;
    int64_t tile_m = 1, max_tiles = 0;
  };

  // Allocates the routing's buffers, lets `route(ids, routed, stream)` fill them (the router and the grouping), then
  // runs the experts and the combine: the partial output F32 [T, H] on the device.
  template <typename Route>
  Tensor route_and_run(const Tensor& x, Route&& route) const {
    const int64_t T = x.size(0), H = cfg_.hidden_size, E = cfg_.num_experts, k = cfg_.top_k, R = T * k;
    QLM_CHECK(x.dim() == 2 && x.size(1) == H && x.dtype() == cfg_.act_dtype && x.device() == cfg_.device &&
              x.is_contiguous());
    const Device dev = cfg_.device;
    cuda::Context& ctx = cuda::context(dev.index);
    Tensor y = Tensor::empty({T, H}, DType::F32, dev);
    if (T == 0) return y;
    Tensor ids = Tensor::empty({R}, DType::I32, dev);
    const GroupedPlan pl = plan(T);
    const int64_t tile_m = pl.grouped ? pl.tile_m : 1;
    // The grid's height (blocks past the real count leave at once).
    const int64_t max_tiles = ops::cu::moe_max_tiles(R, E, tile_m);
    Routed r{.offsets = Tensor::empty({E + 1}, DType::I32, dev),
             .tile_offsets = Tensor::empty({E + 1}, DType::I32, dev),
             .row_token = Tensor::empty({R}, DType::I32, dev),
             .slot_row = Tensor::empty({R}, DType::I32, dev),
             .row_expert = Tensor::empty({R}, DType::I32, dev),
             .tile_expert = Tensor::empty({max_tiles}, DType::I32, dev),
             .weights = Tensor::empty({R}, DType::F32, dev),
             .tile_m = tile_m,
             .max_tiles = max_tiles};
    route(ids, r, ctx.stream);
    if (pl.grouped) {
      run_grouped(x, r, pl.mma, y, ctx);
    } else {
      run_per_expert(x, r, y, ctx);
    }
    return y;
  }

  void run_grouped(const Tensor& x, const Routed& r, bool mma, Tensor& y, cuda::Context& ctx) const {
    const int64_t T = x.size(0), H = cfg_.hidden_size, E = cfg_.num_experts, k = cfg_.top_k, R = T * k;
    const int64_t I_p = cfg_.intermediate_per_partition;
    const Device dev = cfg_.device;
    const int64_t max_tiles = r.max_tiles;
    // Expected tiles: the GEMV's plan counts the whole tiles, the tensor-core kernel's one per active expert more.
    const int64_t tiles = mma ? std::min(R, E) + R / r.tile_m : (R + r.tile_m - 1) / r.tile_m;
    auto experts = [&](const GroupedProjection& p) {
      return cuda::MoeWna16Experts{.table = reinterpret_cast<const cuda::Wna16DeviceWeights*>(p.table.raw_data()),
                                   .num_experts = static_cast<int>(E),
                                   .offsets = r.offsets.data<int32_t>(),
                                   .tile_offsets = r.tile_offsets.data<int32_t>(),
                                   .row_expert = r.row_expert.data<int32_t>(),
                                   .tile_expert = r.tile_expert.data<int32_t>(),
                                   .rows_total = R,
                                   .tile_m = static_cast<int>(r.tile_m)};
    };
    const cuda::MoeWna16Experts e13 = experts(w13_), e2 = experts(w2_);
    QLM_CHECK(w13_.N == 2 * I_p && w2_.N == H);
    // The GEMMs' inputs: F32 in packed-row order (GEMV) or the act dtype in the MMA order (moe_wna16_kernels.h).
    const DType in_dtype = mma ? cfg_.act_dtype : DType::F32;
    const cuda::Wna16Act in_type = wna16_act(in_dtype);
    auto gemm = [&](const GroupedProjection& p, const cuda::MoeWna16Experts& ex, const Tensor& in, Tensor* partial) {
      const auto [splits, per] = mma ? plan_mma_splits(p, tiles, ctx.sm_count) : plan_splits(p, tiles, ctx.sm_count);
      *partial = Tensor::empty({splits, R, p.N}, DType::F32, dev);
      if (mma) {
        QLM_CUDA_CHECK(cuda::launch_moe_wna16_mma(ex, in_type, p.N, p.N_pad, max_tiles, in.raw_data(), p.max_rows,
                                                  splits, per, partial->data<float>(), ctx.stream));
      } else {
        QLM_CUDA_CHECK(cuda::launch_moe_wna16_gemm(ex, p.bits, p.N, p.N_pad, max_tiles, in.data<float>(), p.max_rows,
                                                   splits, per, partial->data<float>(), ctx.stream));
      }
      return splits;
    };
    Tensor xin = Tensor::empty({R, w13_.max_rows}, in_dtype, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_gather(x.raw_data(), wna16_act(cfg_.act_dtype), H,
                                                 r.row_token.data<int32_t>(), e13, w13_.max_rows, in_type,
                                                 xin.raw_data(), ctx.stream));
    Tensor p13;
    const int s13 = gemm(w13_, e13, xin, &p13);
    Tensor ain = Tensor::empty({R, w2_.max_rows}, in_dtype, dev);
    QLM_CUDA_CHECK(cuda::launch_moe_wna16_silu_gather(p13.data<float>(), s13, I_p, e2, w2_.max_rows, in_type,
                                                      ain.raw_data(), ctx.stream));
    Tensor p2;
    const int s2 = gemm(w2_, e2, ain, &p2);
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
  bool mma_ok_ = false;     // ... and the tensor-core kernel can (4-bit, groups in quads, BF16 / F16, sm >= 80)
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
