// FusedMoE against a float64 reference for every MoE method (unquantized, GPTQ sym / asym act-order,
// AWQ, compressed-tensors WNA16, FP8 tensor / channel / block, INT8 W8A8) at TP 1 and 2 on an odd
// number of tokens, with an expert that receives every token and one that receives none. The layer
// is built into a ModuleSet and loaded by the streaming loader from per-expert checkpoint names, as a
// model does. Also: the router (softmax top-k with and without renormalisation), ignore lists and
// per-module overrides reaching experts, config-time and load-time errors naming the expert.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/device.h"
#include "layers/fused_moe.h"
#include "loader/loader.h"
#include "loader/module_set.h"
#include "parallel/communicator.h"
#include "quant/moe_method.h"
#include "quant/w8a8_test_util.h"
#include "support/expect_error.h"
#include "support/moe_cases.h"
#include "support/quantize_ref.h"

namespace qlm::testing {
namespace {

using namespace moe;
constexpr int64_t kT = 7;

// Every token goes to expert 0 and to expert 1 or 2 (alternating); expert 3 gets none.
MoERouting skewed_routing() {
  std::vector<int32_t> ids;
  std::vector<float> w;
  for (int64_t t = 0; t < kT; ++t) {
    const int32_t other = t % 2 ? 1 : 2;
    ids.insert(ids.end(), {t % 3 == 0 ? other : 0, t % 3 == 0 ? 0 : other});  // expert 0 in either slot
    w.insert(w.end(), {0.3f + 0.05f * static_cast<float>(t), 0.7f - 0.05f * static_cast<float>(t)});
  }
  return make_routing(kT, kTopK, kE, ids, w);
}

// Builds the layer on every rank into its own ModuleSet, streams the checkpoint in, runs forward and
// returns each rank's (reduced) output.
std::vector<std::vector<float>> run_moe(const QuantizationConfig* cfg, const Checkpoint& ck, const std::vector<float>& x,
                                        const MoERouting& routing, int tp, const MoEExpertNames& names = {},
                                        std::string* describe = nullptr, DType dtype = DType::F32) {
  std::vector<std::vector<float>> out(static_cast<size_t>(tp));
  LocalCommGroup group(tp);
  run_on_ranks(tp, [&](int r) {
    ModuleSet modules;
    modules.add_stacked(llama_stacked_params());
    modules.add_stacked({"." + names.gate, "." + names.fused, ShardId::at(0)});
    modules.add_stacked({"." + names.up, "." + names.fused, ShardId::at(1)});
    FusedMoESpec spec = moe_spec(names);
    spec.params_dtype = dtype;
    FusedMoE moe(spec, cfg, QuantContext{}, group.context(r),
                 [&](std::unique_ptr<LinearLayer> l) -> LinearLayer& { return modules.add_linear(std::move(l)); });
    load_tensors(ck.tensors, modules);
    moe.finalize();
    if (describe && r == 0) *describe = moe.method().describe();
    Tensor y = moe.forward(Tensor::from_vector(x, {kT, kH}), routing);
    out[static_cast<size_t>(r)] = y.to_float_vector();
  });
  return out;
}

class FusedMoEMethods : public ::testing::TestWithParam<int> {};

TEST_P(FusedMoEMethods, MatchesFloat64ReferenceAtTp1And2) {
  const Case c = cases()[static_cast<size_t>(GetParam())];
  std::unique_ptr<QuantizationConfig> cfg = c.config_json.empty() ? nullptr : make_quant_config(c.config_json);
  const Checkpoint ck = make_checkpoint(c);
  const std::vector<float> x = random_inputs(kT, kH, 5);
  const MoERouting routing = skewed_routing();
  ASSERT_EQ(routing.tokens_of(0), kT);
  ASSERT_EQ(routing.tokens_of(3), 0);
  for (int tp : {1, 2}) {
    const std::vector<double> ref = reference(c, ck.ref, x, routing, tp);
    std::string describe;
    const auto out = run_moe(cfg.get(), ck, x, routing, tp, {}, &describe, c.dtype);
    for (int r = 0; r < tp; ++r) {
      EXPECT_LE(rel_mean_error(out[static_cast<size_t>(r)], ref), c.tol) << c.name << " tp=" << tp << " rank " << r;
      EXPECT_EQ(out[static_cast<size_t>(r)], out[0]) << "ranks disagree, tp=" << tp;
    }
    EXPECT_NE(describe.find("[cpu_grouped]"), std::string::npos) << describe;
  }
}

INSTANTIATE_TEST_SUITE_P(All, FusedMoEMethods, ::testing::Range(0, static_cast<int>(cases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return cases()[static_cast<size_t>(info.param)].name;
                         });

// Mixtral's checkpoint names (w1 / w3 / w2) load into the same layer.
TEST(FusedMoE, MixtralExpertNames) {
  const Case c = cases()[2];  // gptq sym
  auto cfg = make_quant_config(c.config_json);
  const Checkpoint ck = make_checkpoint(c, MoEExpertNames::mixtral());
  const std::vector<float> x = random_inputs(kT, kH, 6);
  const MoERouting routing = skewed_routing();
  const std::vector<double> ref = reference(c, ck.ref, x, routing);
  for (int tp : {1, 2})
    EXPECT_LE(rel_mean_error(run_moe(cfg.get(), ck, x, routing, tp, MoEExpertNames::mixtral())[0], ref), 1e-5);
}

// An expert that receives no token never runs: NaN weights in expert 3 leave the output finite.
TEST(FusedMoE, ExpertsWithoutTokensDoNotRun) {
  Case c = cases()[0];
  Checkpoint ck = make_checkpoint(c);
  for (auto& [name, t] : ck.tensors)
    if (name.find("experts.3.") != std::string::npos) t = Tensor::from_vector(std::vector<float>(t.numel(), NAN), t.shape());
  const std::vector<float> x = random_inputs(kT, kH, 5);
  const MoERouting routing = skewed_routing();
  const std::vector<double> ref = reference(c, ck.ref, x, routing);
  for (int tp : {1, 2}) {
    const auto out = run_moe(nullptr, ck, x, routing, tp);
    for (float v : out[0]) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LE(rel_mean_error(out[0], ref), 1e-5);
  }
}

// Router: softmax top-k, ties to the lower id, with and without renormalisation.
TEST(FusedMoE, RouterSoftmaxTopK) {
  const int64_t T = 5, E = 6, k = 3;
  std::vector<float> logits = random_inputs(T, E, 9);
  for (float& v : logits) v *= 3;
  logits[2 * E + 1] = logits[2 * E + 4] = 10.0f;  // a tie: expert 1 before expert 4
  for (bool renorm : {false, true}) {
    const MoERouting r = select_experts(Tensor::from_vector(logits, {T, E}), k, renorm);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> p(static_cast<size_t>(E));
      double m = -1e300, s = 0;
      for (int64_t e = 0; e < E; ++e) m = std::max(m, double(logits[t * E + e]));
      for (int64_t e = 0; e < E; ++e) s += p[e] = std::exp(double(logits[t * E + e]) - m);
      std::vector<int> order(static_cast<size_t>(E));
      for (int e = 0; e < E; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      double chosen = 0;
      for (int64_t j = 0; j < k; ++j) chosen += p[order[j]] / s;
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(r.topk_ids[t * k + j], order[j]) << "token " << t << " slot " << j;
        const double want = p[order[j]] / s / (renorm ? chosen : 1.0);
        EXPECT_NEAR(r.topk_weights[t * k + j], want, 1e-6);
      }
    }
    EXPECT_EQ(r.topk_ids[2 * k], 1);
    EXPECT_EQ(r.topk_ids[2 * k + 1], 4);
    // Grouped view: every slot once, grouped by expert in token order.
    int64_t total = 0;
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t i = r.expert_offsets[e]; i < r.expert_offsets[e + 1]; ++i) {
        EXPECT_EQ(r.topk_ids[r.sorted_slots[i]], e);
        if (i > r.expert_offsets[e]) {
          EXPECT_LT(r.sorted_slots[i - 1], r.sorted_slots[i]);
        }
      }
      total += r.tokens_of(e);
    }
    EXPECT_EQ(total, T * k);
  }
}

// The forward with router logits equals the forward with the routing they select.
TEST(FusedMoE, ForwardFromRouterLogits) {
  const Case c = cases()[0];
  const Checkpoint ck = make_checkpoint(c);
  const std::vector<float> x = random_inputs(kT, kH, 11);
  std::vector<float> logits = random_inputs(kT, kE, 12);
  const MoERouting routing = select_experts(Tensor::from_vector(logits, {kT, kE}), kTopK, true);
  const std::vector<double> ref = reference(c, ck.ref, x, routing);
  ModuleSet modules;
  modules.add_stacked(llama_stacked_params());
  FusedMoE moe(moe_spec(), nullptr, QuantContext{}, TpContext{},
               [&](std::unique_ptr<LinearLayer> l) -> LinearLayer& { return modules.add_linear(std::move(l)); });
  load_tensors(ck.tensors, modules);
  const Tensor y = moe.forward(Tensor::from_vector(x, {kT, kH}), Tensor::from_vector(logits, {kT, kE}));
  EXPECT_LE(rel_mean_error(y.to_float_vector(), ref), 1e-5);
}

// Per-module overrides and ignore lists reach experts through the one scheme-resolution function:
// GPTQ dynamic "-:" keeps expert 1 unquantized (stored as float), the rest int4.
TEST(FusedMoE, OverridesAndIgnoreListsApplyToExperts) {
  const Case q = cases()[2];
  const Case f = cases()[0];
  auto cfg = make_quant_config(R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false,
      "sym": true, "dynamic": {"-:.*\\.experts\\.1\\..*": {}}})");
  Checkpoint ck = make_checkpoint(q);
  const Checkpoint dense = make_checkpoint(f);
  std::erase_if(ck.tensors, [](const auto& p) { return p.first.find("experts.1.") != std::string::npos; });
  for (const auto& p : dense.tensors)
    if (p.first.find("experts.1.") != std::string::npos) ck.tensors.push_back(p);
  ck.ref[1] = dense.ref[1];
  const std::vector<float> x = random_inputs(kT, kH, 5);
  const MoERouting routing = skewed_routing();
  const std::vector<double> ref = reference(q, ck.ref, x, routing);
  for (int tp : {1, 2}) {
    std::string describe;
    const auto out = run_moe(cfg.get(), ck, x, routing, tp, {}, &describe);
    EXPECT_LE(rel_mean_error(out[0], ref), 1e-5) << "tp=" << tp;
    EXPECT_NE(describe.find("mixed"), std::string::npos) << describe;
  }
  // compressed-tensors ignore list naming expert 2's projections.
  const Case ct = cases()[5];
  auto ct_cfg = make_quant_config(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "ignore": ["lm_head", "re:.*experts\\.2\\..*"], "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 4, "type": "int", "symmetric": false, "strategy": "group", "group_size": 32}}}})");
  Checkpoint ck2 = make_checkpoint(ct);
  std::erase_if(ck2.tensors, [](const auto& p) { return p.first.find("experts.2.") != std::string::npos; });
  for (const auto& p : dense.tensors)
    if (p.first.find("experts.2.") != std::string::npos) ck2.tensors.push_back(p);
  ck2.ref[2] = dense.ref[2];
  EXPECT_LE(rel_mean_error(run_moe(ct_cfg.get(), ck2, x, routing, 2)[0], reference(ct, ck2.ref, x, routing)), 1e-5);
}

TEST(FusedMoE, ErrorsNameTheExpert) {
  // Gate quantized but up not: w13 cannot be served, at config time (before any tensor is read).
  auto cfg = make_quant_config(R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false,
      "sym": true, "dynamic": {"-:.*\\.experts\\.2\\.up_proj": {}}})");
  ModuleSet modules;
  auto sink = [&](std::unique_ptr<LinearLayer> l) -> LinearLayer& { return modules.add_linear(std::move(l)); };
  EXPECT_QLM_ERROR(FusedMoE(moe_spec(), cfg.get(), QuantContext{}, TpContext{}, sink), "config.fused_mismatch",
                   "experts.2.up_proj");

  // A missing expert tensor is named by the loader's completeness check.
  const Case c = cases()[2];
  Checkpoint ck = make_checkpoint(c);
  std::erase_if(ck.tensors, [](const auto& p) { return p.first == kPrefix + ".experts.3.down_proj.scales"; });
  auto gptq = make_quant_config(c.config_json);
  ModuleSet m2;
  m2.add_stacked(llama_stacked_params());
  FusedMoE moe(moe_spec(), gptq.get(), QuantContext{}, TpContext{},
               [&](std::unique_ptr<LinearLayer> l) -> LinearLayer& { return m2.add_linear(std::move(l)); });
  EXPECT_QLM_ERROR(load_tensors(ck.tensors, m2), "loader.incomplete", "experts.3.down_proj");

  // Sizes that do not split over TP, and an impossible top-k.
  FusedMoESpec bad = moe_spec();
  bad.intermediate_size = 63;
  LocalCommGroup group(2);
  EXPECT_QLM_ERROR(FusedMoE(bad, nullptr, QuantContext{}, group.context(0)), "layer.tp_divisibility", "63");
  bad = moe_spec();
  bad.top_k = 5;
  EXPECT_QLM_ERROR(FusedMoE(bad, nullptr, QuantContext{}, TpContext{}), "layer.spec", "top-k = 5");

  // What the CUDA fused-MoE kernel cannot serve is refused when the layer is declared (no device
  // needed), naming the layer, the kernel and the reason: here more experts than its router takes.
  // (A build without the CUDA backend has no CUDA linear kernels either: the experts' own
  // projections are refused first.)
  QuantContext cuda;
  cuda.device = Device::cuda(0);
  cuda.capability = 90;
  cuda.act_dtype = DType::BF16;
  FusedMoESpec many = moe_spec();
  many.num_experts = 1025;
  if (cuda_backend_built()) {
    EXPECT_QLM_ERROR(FusedMoE(many, nullptr, cuda, TpContext{}), "kernel.none",
                     "cuda_grouped: 1025 experts; the device router takes at most 1024");
    EXPECT_QLM_ERROR(FusedMoE(many, nullptr, cuda, TpContext{}), "kernel.none", "unquantized: w13 [");
    EXPECT_QLM_ERROR(FusedMoE(many, nullptr, cuda, TpContext{}), "kernel.none", "act=BF16 on cuda:0");
  } else {
    EXPECT_QLM_ERROR(FusedMoE(many, nullptr, cuda, TpContext{}), "kernel.none", "no dense linear kernel");
  }
}

}  // namespace
}  // namespace qlm::testing
