// CPU fused-MoE kernel: tokens grouped by expert, one pass per expert over its token group (gather
// rows → w13 → SiLU·mul → w2 → weighted scatter-add), each projection running on the expert's own
// prepared linear kernel, so every weight format the linear layers support works per expert.
// Experts without tokens cost nothing.
#include <cstring>

#include "kernels/moe_kernel.h"
#include "runtime/ops/activation.h"

namespace qlm {
namespace {

class CpuGroupedMoE final : public MoEKernel {
 public:
  explicit CpuGroupedMoE(const MoEKernelConfig& cfg) : cfg_(cfg) {}
  std::string name() const override { return "cpu_grouped"; }

  void prepare(std::vector<MoEExpertOps> experts) override {
    experts_ = std::move(experts);
    local_.assign(static_cast<size_t>(cfg_.num_experts), -1);
    for (size_t i = 0; i < experts_.size(); ++i) {
      QLM_CHECK(experts_[i].id >= 0 && experts_[i].id < cfg_.num_experts);
      local_[static_cast<size_t>(experts_[i].id)] = static_cast<int64_t>(i);
    }
  }

  void run(const Tensor& x, const MoERouting& routing, Tensor& y) const override {
    const int64_t H = cfg_.hidden_size, k = routing.top_k;
    QLM_CHECK(x.dim() == 2 && x.size(1) == H && x.dtype() == DType::F32 && x.is_contiguous());
    QLM_CHECK(y.dim() == 2 && y.size(0) == x.size(0) && y.size(1) == H && y.is_contiguous());
    QLM_CHECK(routing.tokens == x.size(0) && routing.num_experts == cfg_.num_experts);
    const float* xs = x.data<float>();
    float* ys = y.data<float>();
    for (int64_t e = 0; e < routing.num_experts; ++e) {
      const int64_t n = routing.tokens_of(e);
      const int64_t local = local_[static_cast<size_t>(e)];
      if (n == 0 || local < 0) continue;  // no tokens, or another rank's expert
      const int32_t* slots = routing.sorted_slots.data() + routing.expert_offsets[e];
      Tensor xe = Tensor::empty({n, H}, DType::F32);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(xe.data<float>() + i * H, xs + (slots[i] / k) * H, static_cast<size_t>(H) * sizeof(float));
      const MoEExpertOps& ex = experts_[static_cast<size_t>(local)];
      const Tensor gate_up = ex.w13(xe);
      const int64_t width = gate_up.size(1) / 2;
      Tensor act = Tensor::empty({n, width}, DType::F32);
      ops::silu_and_mul(gate_up.data<float>(), act.data<float>(), n, width);
      const Tensor out = ex.w2(act).contiguous();
      const float* o = out.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        const float w = routing.topk_weights[static_cast<size_t>(slots[i])];
        float* dst = ys + (slots[i] / k) * H;
        const float* src = o + i * H;
        for (int64_t h = 0; h < H; ++h) dst[h] += w * src[h];
      }
    }
  }

 private:
  MoEKernelConfig cfg_;
  std::vector<MoEExpertOps> experts_;
  std::vector<int64_t> local_;  // global id -> local index, -1 when not on this rank
};

const MoEKernelRegistrar kCpuGrouped{{
    .name = "cpu_grouped",
    .backend = "cpu",
    .device = DeviceType::CPU,
    .priority = 100,
    .can_implement = [](const MoEKernelConfig& c) -> std::optional<std::string> {
      if (c.act_dtype != DType::F32) return std::string("the CPU runs F32 activations only");
      return std::nullopt;
    },
    .create = [](const MoEKernelConfig& c) -> std::unique_ptr<MoEKernel> { return std::make_unique<CpuGroupedMoE>(c); },
}};

}  // namespace
}  // namespace qlm
