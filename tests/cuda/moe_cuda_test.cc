// The fused-MoE layer on CUDA (`cuda_grouped`) against the CPU float64 reference for every MoE
// method of tests/support/moe_cases.h (unquantized F32 / BF16, GPTQ sym and asym act-order, AWQ,
// compressed-tensors WNA16, FP8 tensor / channel / block, INT8 W8A8), with the router on the device:
// 1, 7, 33 and 300 tokens (WNA16 runs grouped up to 33 tokens here and per expert at 300), expert 0
// receiving every token and expert 3 none, outputs taken from NaN-poisoned memory, BF16 and F32
// activations (WNA16 also F16, and BF16 with the CUDA-core GEMV forced instead of the tensor-core kernel); also routing
// without renormalisation, NaN weights in an expert without tokens, WNA16 expert weights held once (no linear kernel
// per expert), host input refused, and the router folded into the routing (decode) against the logits path. Skipped
// without a visible GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "kernels/cuda/moe_cuda_options.h"
#include "layers/fused_moe.h"
#include "loader/loader.h"
#include "loader/module_set.h"
#include "support/expect_error.h"
#include "support/moe_cases.h"
#include "support/quantize_ref.h"

namespace qlm::testing {
namespace {

using namespace moe;

#define SKIP_WITHOUT_GPU() \
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device visible"

const Device kGpu = Device::cuda(0);

// Router logits [T, kE] rounded to `act`: expert 0 always first (every token), expert 3 never
// (no token), experts 1 and 2 share the second place by a random margin.
std::vector<float> skewed_logits(int64_t T, DType act, uint64_t seed) {
  std::vector<float> l = random_inputs(T, kE, seed);
  for (int64_t t = 0; t < T; ++t) {
    l[t * kE + 0] = 4.0f + 0.25f * l[t * kE + 0];
    l[t * kE + 3] = -8.0f;
  }
  return Tensor::from_vector(l, {T, kE}).to(act).to_float_vector();
}

std::vector<float> rounded(const std::vector<float>& v, DType act) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(act).to_float_vector();
}

Tensor on_gpu(const std::vector<float>& v, Shape shape, DType act) {
  return Tensor::from_vector(v, std::move(shape)).to(act).to_device(kGpu);
}

// Fills the allocator's cache for the output's size class with NaN, so an unwritten element shows.
void poison_output_block(int64_t T) {
  (void)Tensor::from_vector(std::vector<float>(static_cast<size_t>(T * kH), NAN), {T, kH}).to_device(kGpu);
}

struct GpuLayer {
  ModuleSet modules;
  std::unique_ptr<FusedMoE> moe;
};

std::unique_ptr<GpuLayer> load_gpu_layer(const QuantizationConfig* cfg, const Checkpoint& ck, DType act, DType params,
                                         bool renormalize = true) {
  auto g = std::make_unique<GpuLayer>();
  g->modules.add_stacked(llama_stacked_params());
  QuantContext ctx;
  ctx.device = kGpu;
  ctx.capability = cuda_capability(0);
  ctx.act_dtype = act;
  FusedMoESpec spec = moe_spec();
  spec.params_dtype = params;
  spec.renormalize = renormalize;
  ModuleSet* modules = &g->modules;
  g->moe = std::make_unique<FusedMoE>(
      spec, cfg, ctx, TpContext{},
      [modules](std::unique_ptr<LinearLayer> l) -> LinearLayer& { return modules->add_linear(std::move(l)); });
  load_tensors(ck.tensors, g->modules);
  g->moe->finalize();
  return g;
}

// The layer's output for T tokens on the GPU vs the reference, with host routing from the same logits.
void check_tokens(FusedMoE& moe, const Case& c, const Checkpoint& ck, int64_t T, DType act, bool renormalize,
                  double tol) {
  const std::string what = c.name + " " + std::string(dtype_name(act)) + " T=" + std::to_string(T);
  const std::vector<float> x = rounded(random_inputs(T, kH, 100 + static_cast<uint64_t>(T)), act);
  const std::vector<float> logits = skewed_logits(T, act, 200 + static_cast<uint64_t>(T));
  const MoERouting routing = select_experts(Tensor::from_vector(logits, {T, kE}), kTopK, renormalize);
  ASSERT_EQ(routing.tokens_of(0), T) << what;
  ASSERT_EQ(routing.tokens_of(3), 0) << what;
  poison_output_block(T);
  const Tensor y = moe.forward(on_gpu(x, {T, kH}, act), on_gpu(logits, {T, kE}, act));
  ASSERT_FALSE(y.on_host()) << what;
  ASSERT_EQ(y.dtype(), DType::F32) << what;
  const std::vector<float> got = y.to_device(Device::cpu()).to_float_vector();
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << what << ": an output is not finite (unwritten?)";
  const std::vector<double> ref = reference(c, ck.ref, x, routing, 1, act == DType::F32 ? DType::F64 : act);
  EXPECT_LE(rel_mean_error(got, ref), tol) << what;
}

// The grouped WNA16 kernel for one scope (Auto again at its end).
struct ForcedGroupedKernel {
  explicit ForcedGroupedKernel(MoeWna16Grouped kernel) { set_moe_wna16_grouped(kernel); }
  ~ForcedGroupedKernel() { set_moe_wna16_grouped(MoeWna16Grouped::Auto); }
};

class CudaMoeMethods : public ::testing::TestWithParam<int> {};

TEST_P(CudaMoeMethods, MatchesFloat64Reference) {
  SKIP_WITHOUT_GPU();
  const Case c = cases()[static_cast<size_t>(GetParam())];
  std::unique_ptr<QuantizationConfig> cfg = c.config_json.empty() ? nullptr : make_quant_config(c.config_json);
  const Checkpoint ck = make_checkpoint(c);
  // WNA16 experts: BF16 and F16 run the tensor-core grouped GEMM (4-bit, groups of 32), BF16 again on the CUDA-core
  // GEMV (forced), F32 on the GEMV.
  const bool wna16 = c.name.rfind("gptq", 0) == 0 || c.name == "awq" || c.name == "ct_wna16_asym";
  struct Run {
    DType act;
    MoeWna16Grouped kernel;
  };
  std::vector<Run> runs = {{DType::BF16, MoeWna16Grouped::Auto}, {DType::F32, MoeWna16Grouped::Auto}};
  if (wna16) runs.insert(runs.end(), {{DType::F16, MoeWna16Grouped::Auto}, {DType::BF16, MoeWna16Grouped::Gemv}});
  for (const Run& run : runs) {
    SCOPED_TRACE(std::string(dtype_name(run.act)) + (run.kernel == MoeWna16Grouped::Gemv ? " (GEMV forced)" : ""));
    const ForcedGroupedKernel forced(run.kernel);
    auto layer = load_gpu_layer(cfg.get(), ck, run.act, c.dtype);
    EXPECT_NE(layer->moe->method().describe().find("[cuda_grouped]"), std::string::npos)
        << layer->moe->method().describe();
    // F32: the CPU tolerance (activation quantizers may round a few values the other way);
    // BF16 / F16: 1 % relative mean error.
    const double tol = run.act == DType::F32 ? std::max(c.tol, 1e-4) * 2 : 0.01;
    for (int64_t T : {1, 7, 33, 300}) check_tokens(*layer->moe, c, ck, T, run.act, true, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaMoeMethods, ::testing::Range(0, static_cast<int>(cases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return cases()[static_cast<size_t>(info.param)].name;
                         });

// Softmax top-k without renormalisation (Qwen2-MoE, Qwen3-MoE without norm_topk_prob), grouped
// (GPTQ) and per expert (unquantized).
TEST(CudaMoe, RoutesWithoutRenormalisation) {
  SKIP_WITHOUT_GPU();
  for (int index : {0, 2}) {
    const Case c = cases()[static_cast<size_t>(index)];
    auto cfg = c.config_json.empty() ? nullptr : make_quant_config(c.config_json);
    const Checkpoint ck = make_checkpoint(c);
    auto layer = load_gpu_layer(cfg.get(), ck, DType::F32, c.dtype, /*renormalize=*/false);
    for (int64_t T : {5, 300}) check_tokens(*layer->moe, c, ck, T, DType::F32, false, 2e-4);
  }
}

// An expert without tokens is never run on the GPU either: NaN weights in expert 3 stay out.
TEST(CudaMoe, ExpertsWithoutTokensDoNotRun) {
  SKIP_WITHOUT_GPU();
  const Case c = cases()[0];
  Checkpoint ck = make_checkpoint(c);
  for (auto& [name, t] : ck.tensors)
    if (name.find("experts.3.") != std::string::npos)
      t = Tensor::from_vector(std::vector<float>(t.numel(), NAN), t.shape());
  auto layer = load_gpu_layer(nullptr, ck, DType::BF16, DType::F32);
  for (int64_t T : {1, 33}) check_tokens(*layer->moe, c, ck, T, DType::BF16, true, 0.01);
}

// WNA16 experts live only in the MoE kernel's layout on the GPU: their projections build no
// kernel of their own (running one alone is refused), while FP8 experts keep their linear kernels.
TEST(CudaMoe, Wna16ExpertWeightsAreHeldOnce) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : cases()) {
    if (c.config_json.empty()) continue;
    auto cfg = make_quant_config(c.config_json);
    const Checkpoint ck = make_checkpoint(c);
    auto layer = load_gpu_layer(cfg.get(), ck, DType::BF16, c.dtype);
    const bool wna16 = c.name.find("gptq") != std::string::npos || c.name.find("awq") != std::string::npos ||
                       c.name.find("wna16") != std::string::npos;
    const Tensor x = on_gpu(random_inputs(2, kH, 3), {2, kH}, DType::BF16);
    for (const FusedMoE::Expert& e : layer->moe->experts()) {
      if (wna16) {
        EXPECT_QLM_ERROR(e.w13->forward(x), "quant.moe_expert", "fused-MoE kernel");
      } else {
        EXPECT_EQ(e.w13->forward(x).size(0), 2) << c.name;
      }
    }
    check_tokens(*layer->moe, c, ck, 300, DType::BF16, true, 0.01);
  }
}

// The router folded into the routing (FusedMoE::forward_router_weight, what the model runs at decode) against the same
// layer fed the router's logits: x and the router weight hold small integers times powers of two, so the logits are
// exact in any order of summation and both paths route the same; the outputs must be the same bits. Unquantized
// experts (per expert) and GPTQ (grouped tensor cores), BF16 and F16, 1 to 4 tokens; 5 tokens and a router weight of
// the wrong shape are refused.
TEST(CudaMoe, RouterFoldedIntoTheRoutingMatchesTheLogitsPath) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-3, 3);
  const auto small_values = [&](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = static_cast<float>(small(rng)) * scale;
    return v;
  };
  for (int index : {0, 2}) {
    const Case c = cases()[static_cast<size_t>(index)];
    auto cfg = c.config_json.empty() ? nullptr : make_quant_config(c.config_json);
    const Checkpoint ck = make_checkpoint(c);
    for (const DType act : {DType::BF16, DType::F16}) {
      auto layer = load_gpu_layer(cfg.get(), ck, act, c.dtype);
      FusedMoE& moe = *layer->moe;
      if (!moe.routes_from_weight(1)) GTEST_SKIP() << "the MoE kernel does not fold the router on this GPU";
      const std::vector<float> w = small_values(kE * kH, 1.0f / 64);
      const Tensor wd = on_gpu(w, {kE, kH}, act);
      for (int64_t T : {1, 3, 4}) {
        const std::string what = c.name + " " + std::string(dtype_name(act)) + " T=" + std::to_string(T);
        ASSERT_TRUE(moe.routes_from_weight(T)) << what;
        const std::vector<float> x = small_values(T * kH, 0.25f);
        std::vector<float> logits(static_cast<size_t>(T * kE));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t e = 0; e < kE; ++e) {
            double sum = 0;
            for (int64_t h = 0; h < kH; ++h) sum += static_cast<double>(x[t * kH + h]) * w[e * kH + h];
            logits[t * kE + e] = static_cast<float>(sum);
          }
        const Tensor xd = on_gpu(x, {T, kH}, act);
        const std::vector<float> want =
            moe.forward(xd, on_gpu(logits, {T, kE}, act)).to_device(Device::cpu()).to_float_vector();
        poison_output_block(T);
        const std::vector<float> got = moe.forward_router_weight(xd, wd).to_device(Device::cpu()).to_float_vector();
        EXPECT_EQ(got, want) << what;
      }
      EXPECT_FALSE(moe.routes_from_weight(5));
      EXPECT_QLM_ERROR(moe.forward_router_weight(on_gpu(small_values(5 * kH, 1), {5, kH}, act), wd), "kernel.device",
                       "router's weight");
      EXPECT_QLM_ERROR(moe.forward_router_weight(on_gpu(small_values(kH, 1), {1, kH}, act), on_gpu(w, {kH, kE}, act)),
                       "layer.input_shape", "router weight");
    }
  }
}

TEST(CudaMoe, HostInputIsRefused) {
  SKIP_WITHOUT_GPU();
  const Case c = cases()[0];
  const Checkpoint ck = make_checkpoint(c);
  auto layer = load_gpu_layer(nullptr, ck, DType::BF16, DType::F32);
  const Tensor x = Tensor::from_vector(random_inputs(3, kH, 1), {3, kH});
  EXPECT_QLM_ERROR(layer->moe->forward(x, Tensor::zeros({3, kE}, DType::F32)), "kernel.device", "cuda_grouped");
  const Tensor xg = on_gpu(random_inputs(3, kH, 1), {3, kH}, DType::F32);
  EXPECT_QLM_ERROR(layer->moe->forward(xg, Tensor::zeros({3, kE}, DType::F32).to_device(kGpu)), "layer.input_shape",
                   "expects BF16");
}

}  // namespace
}  // namespace qlm::testing
