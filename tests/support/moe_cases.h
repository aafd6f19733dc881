// The mixture-of-experts test cases shared by the CPU layer test (tests/layers/fused_moe_test.cc)
// and the CUDA one (tests/cuda/moe_cuda_test.cc): every MoE method (unquantized F32 / BF16, GPTQ sym
// and asym act-order, AWQ, compressed-tensors WNA16, FP8 tensor / channel / block, INT8 W8A8) as
// per-expert checkpoint tensors with their dequantized weights, and the float64 reference of the
// routed forward.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/moe_kernel.h"
#include "layers/fused_moe.h"
#include "quant/w8a8_test_util.h"

namespace qlm::testing::moe {

constexpr int64_t kH = 64, kI = 64, kE = 4, kTopK = 2;
inline const std::string kPrefix = "model.layers.0.mlp";

// One expert projection: checkpoint tensors (suffix -> tensor) and the dequantized weight [N, K].
struct Proj {
  CheckpointTensors tensors;
  std::vector<double> deq;
};
// Quantizes a float weight [N, K] (nn.Linear layout) the way one format stores it.
using Quantizer = std::function<Proj(const std::vector<float>& w_nk, int64_t N, int64_t K, int part)>;

struct Case {
  std::string name;
  std::string config_json;  // empty: unquantized
  Quantizer quantize;
  RefAct act = RefAct::None;  // activation quantization of both projections' inputs
  int64_t act_group = 0;
  double tol = 1e-5;         // relative mean error vs the reference
  DType dtype = DType::F32;  // of dense weights / scales (the layer's params_dtype)
  // Per-tensor FP8 scales: w13's gate and up parts are requantized to their max scale.
  bool requant_w13 = false;
};

// The model of every expert in double: gate/up [I, H], down [H, I].
struct ExpertRef {
  std::vector<double> gate, up, down;
};

struct Checkpoint {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<ExpertRef> ref;
};

// The cases, in a fixed order (index = test parameter).
std::vector<Case> cases();
// Checkpoint tensors of kE experts under "<kPrefix>.experts.<e>.<names>".
Checkpoint make_checkpoint(const Case& c, const MoEExpertNames& names = {}, uint64_t seed = 100);
// y[t] = Σ_j w_tj · down_e (silu(gate_e x) ⊙ up_e x), e = ids[t, j], in double, for routing.tokens
// tokens. Dynamic activation scales of w2's input are per token on each rank's slice of the
// intermediate size (as the row-parallel kernel sees it), so the reference quantizes per slice of I / tp.
// `inter` BF16 / F16: gate, up and the SiLU·mul product are rounded to it, as a device layer whose
// expert projections output the act dtype computes them (the input of an activation quantizer).
std::vector<double> reference(const Case& c, const std::vector<ExpertRef>& ref, const std::vector<float>& x,
                              const MoERouting& r, int tp = 1, DType inter = DType::F64);
// The layer spec of the cases: kE experts, top-kTopK, renormalised.
FusedMoESpec moe_spec(const MoEExpertNames& names = {});

}  // namespace qlm::testing::moe
