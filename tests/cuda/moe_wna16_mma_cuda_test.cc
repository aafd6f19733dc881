// The tensor-core grouped MoE GEMM (launch_moe_wna16_mma) on its own: random 4-bit experts (symmetric and zero
// points, group sizes 32 / 64 / 128 / one group, act-order), rows per expert from 0 to 70 over 8-, 16- and 32-row
// tiles, K splits that do and do not divide the chunks, BF16 and F16 activations, against the float64 product of the
// generator's dequantized weights with the same (rounded) activations; partial sums taken from NaN-poisoned memory.
// Also which layouts it can run (cuda_wna16_groups_in_quads, host-only) and the launcher's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "kernels/cuda/wna16_layout.h"
#include "tests/kernels/wna16_random.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/quantize_ref.h"

#ifdef QLM_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/context.h"
#include "kernels/cuda/moe_wna16_kernels.h"
#include "kernels/cuda/wna16_device.h"
#include "runtime/ops/cuda/moe_launch.h"
#endif

namespace qlm {
namespace {

using testing::Wna16Spec;

// Which layouts the tensor-core kernel can run: every aligned quad of chunks (32 packed 4-bit rows) in one group.
TEST(MoeWna16MmaLayout, GroupsInQuads) {
  struct Expect {
    Wna16Spec spec;
    bool in_quads;
  };
  const std::vector<Expect> cases = {
      {{.K = 384, .N = 8, .group_size = 128}, true},
      {{.K = 160, .N = 8, .group_size = 64}, true},  // last group 32 rows: still whole quads
      {{.K = 384, .N = 8, .group_size = 96}, true},  // 12 chunks per group
      {{.K = 256, .N = 8, .group_size = 32, .zero_points = true, .act_order = true}, true},
      {{.K = 256, .N = 8, .group_size = -1}, true},
      {{.K = 288, .N = 8, .group_size = 48}, false},                     // 6 chunks per group
      {{.K = 101, .N = 8, .group_size = -1}, false},                     // 13 chunks
      {{.K = 100, .N = 8, .group_size = 20, .act_order = true}, false},  // groups padded to 3 chunks
      {{.K = 200, .N = 8, .group_size = 32}, false},                     // 25 chunks
  };
  for (const Expect& c : cases) {
    SCOPED_TRACE(testing::wna16_spec_str(c.spec));
    EXPECT_EQ(cuda_wna16_groups_in_quads(pack_cuda_wna16(testing::random_wna16(c.spec).weights)), c.in_quads);
  }
}

#ifdef QLM_WITH_CUDA

#define SKIP_WITHOUT_GPU() \
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device visible"

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

struct MmaCase {
  int64_t K, N, group;
  bool zero_points, act_order;
  std::vector<int> rows;  // per expert
  int tile_m, splits;
  DType act;
};

std::string case_str(const MmaCase& c) {
  std::string rows;
  for (int r : c.rows) rows += std::to_string(r) + ",";
  return "K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) + " group=" + std::to_string(c.group) +
         " zp=" + std::to_string(c.zero_points) + " act_order=" + std::to_string(c.act_order) + " rows=" + rows +
         " tile_m=" + std::to_string(c.tile_m) + " splits=" + std::to_string(c.splits) + " " +
         std::string(dtype_name(c.act));
}

Tensor on_gpu_i32(const std::vector<int32_t>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to_device(Device::cuda(0));
}

// Random experts uploaded in the kernel's layout, with their device table.
struct Experts {
  std::vector<testing::RandomWna16> gen;
  std::vector<Wna16DeviceLayout> uploaded;
  Tensor table;  // Wna16DeviceWeights[E] (bytes) on the GPU
  int64_t stride = 0, chunks = 0, N_pad = 0;
};

Experts upload_experts(const std::vector<testing::Wna16Spec>& specs) {
  Experts x;
  std::vector<uint8_t> table_bytes(specs.size() * sizeof(cuda::Wna16DeviceWeights));
  for (size_t e = 0; e < specs.size(); ++e) {
    x.gen.push_back(testing::random_wna16(specs[e]));
    const CudaWna16Layout layout = pack_cuda_wna16(x.gen.back().weights);
    EXPECT_TRUE(cuda_wna16_groups_in_quads(layout)) << testing::wna16_spec_str(specs[e]);
    x.uploaded.push_back(upload_wna16_layout(layout, Device::cuda(0)));
    const cuda::Wna16DeviceWeights& v = x.uploaded.back().view;
    x.stride = std::max(x.stride, v.rows);
    x.chunks = std::max(x.chunks, v.chunks);
    x.N_pad = v.N_pad;
    std::memcpy(table_bytes.data() + e * sizeof(v), &v, sizeof(v));
  }
  x.table = Tensor::from_vector(table_bytes, {static_cast<int64_t>(table_bytes.size())}).to_device(Device::cuda(0));
  return x;
}

void run_case(const MmaCase& c, uint64_t seed) {
  const Device gpu = Device::cuda(0);
  const int E = static_cast<int>(c.rows.size());
  std::vector<testing::Wna16Spec> specs;
  for (int e = 0; e < E; ++e)
    specs.push_back({.bits = 4,
                     .K = c.K,
                     .N = c.N,
                     .group_size = c.group,
                     .zero_points = c.zero_points,
                     .act_order = c.act_order,
                     .seed = seed + static_cast<uint64_t>(e)});
  const Experts experts = upload_experts(specs);
  if (::testing::Test::HasFailure()) return;
  const std::vector<testing::RandomWna16>& gen = experts.gen;
  const Tensor& table = experts.table;
  const int64_t stride = experts.stride, chunks = experts.chunks, N_pad = experts.N_pad;

  // Routing: expert e owns rows offsets[e] .. offsets[e + 1], each row some token of T.
  const int64_t T = 6;
  std::vector<int32_t> offsets = {0}, tile_offsets = {0}, row_expert, tile_expert;
  for (int e = 0; e < E; ++e) {
    const int r = c.rows[static_cast<size_t>(e)], tiles = (r + c.tile_m - 1) / c.tile_m;
    offsets.push_back(offsets.back() + r);
    tile_offsets.push_back(tile_offsets.back() + tiles);
    row_expert.insert(row_expert.end(), static_cast<size_t>(r), e);
    tile_expert.insert(tile_expert.end(), static_cast<size_t>(tiles), e);
  }
  const int64_t R = offsets.back();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> row_token(static_cast<size_t>(R));
  for (auto& t : row_token) t = static_cast<int32_t>(rng() % T);
  const Tensor x_act = Tensor::from_vector(testing::random_inputs(T, c.K, seed + 100), {T, c.K}).to(c.act);  // rounded
  const std::vector<float> x = x_act.to_float_vector();

  const int64_t max_tiles = ops::cu::moe_max_tiles(R, E, c.tile_m);
  tile_expert.resize(static_cast<size_t>(max_tiles), -1);  // the grid's tiles past the last: never read as experts
  const Tensor off_d = on_gpu_i32(offsets), tile_d = on_gpu_i32(tile_offsets), tok_d = on_gpu_i32(row_token),
               row_e = on_gpu_i32(row_expert), tile_e = on_gpu_i32(tile_expert);
  const cuda::MoeWna16Experts ex{.table = reinterpret_cast<const cuda::Wna16DeviceWeights*>(table.raw_data()),
                                 .num_experts = E,
                                 .offsets = off_d.data<int32_t>(),
                                 .tile_offsets = tile_d.data<int32_t>(),
                                 .row_expert = row_e.data<int32_t>(),
                                 .tile_expert = tile_e.data<int32_t>(),
                                 .rows_total = R,
                                 .tile_m = c.tile_m};
  const cuda::Wna16Act act = wna16_act(c.act);
  cudaStream_t stream = cuda::context(0).stream;
  Tensor xb = Tensor::empty({R, stride}, c.act, gpu);
  const Tensor x_d = x_act.to_device(gpu);
  CUDA_OK(cuda::launch_moe_wna16_gather(x_d.raw_data(), act, c.K, tok_d.data<int32_t>(), ex, stride, act, xb.raw_data(),
                                        stream));
  const int64_t cps = ((chunks + c.splits - 1) / c.splits + 3) / 4 * 4;
  const int splits = static_cast<int>((chunks + cps - 1) / cps);
  Tensor partial = Tensor::from_vector(std::vector<float>(static_cast<size_t>(splits * R * c.N), NAN), {splits, R, c.N})
                       .to_device(gpu);
  CUDA_OK(cuda::launch_moe_wna16_mma(ex, act, c.N, N_pad, max_tiles, xb.raw_data(), stride, splits, cps,
                                     partial.data<float>(), stream));
  cuda::synchronize(0);  // throws on a kernel fault
  const std::vector<float> p = partial.to_device(Device::cpu()).to_float_vector();

  std::vector<float> got(static_cast<size_t>(R * c.N), 0.0f);
  std::vector<float> want(got.size());
  for (int e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t n = 0; n < c.N; ++n) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) sum += p[(s * R + r) * c.N + n];
        ASSERT_TRUE(std::isfinite(sum)) << "row " << r << " column " << n << ": not finite (unwritten?)";
        got[r * c.N + n] = sum;
        double ref = 0.0;
        const float* xr = x.data() + row_token[r] * c.K;
        for (int64_t k = 0; k < c.K; ++k) ref += static_cast<double>(xr[k]) * gen[e].dequant[k * c.N + n];
        want[r * c.N + n] = static_cast<float>(ref);
      }
  // Exact integer weights times exact activations, F32 accumulation and F32 scales: far below the 1e-2 budget.
  EXPECT_LE(testing::mean_relative_error(got, want), 1e-5);
}

TEST(CudaMoeWna16Mma, MatchesFloat64Reference) {
  SKIP_WITHOUT_GPU();
  const std::vector<MmaCase> cases = {
      {1024, 200, 128, false, false, {0, 1, 9, 40, 3}, 8, 3, DType::BF16},
      {544, 136, 32, true, true, {5, 16, 0, 17}, 16, 2, DType::F16},
      {256, 64, -1, true, false, {33, 2, 70}, 32, 1, DType::BF16},
      {4096, 512, 64, false, false, {1, 1}, 8, 5, DType::BF16},
      {1152, 70, 128, true, true, {7, 0, 31, 8}, 32, 4, DType::F16},
  };
  uint64_t seed = 10;
  for (const MmaCase& c : cases) {
    SCOPED_TRACE(case_str(c));
    run_case(c, seed += 10);
  }
}

TEST(CudaMoeWna16Mma, RefusesWhatItCannotRun) {
  const cuda::MoeWna16Experts ex{.num_experts = 1, .rows_total = 1, .tile_m = 8};
  float out = 0.0f;
  const uint16_t xb[8] = {};
  EXPECT_EQ(cuda::launch_moe_wna16_mma(ex, cuda::Wna16Act::BF16, 8, 8, 2, xb, 8, 1, 6, &out, nullptr),
            cudaErrorInvalidValue);  // chunks per split not a multiple of 4
  EXPECT_EQ(cuda::launch_moe_wna16_mma(ex, cuda::Wna16Act::F32, 8, 8, 2, xb, 8, 1, 4, &out, nullptr),
            cudaErrorInvalidValue);  // F32 activations
  EXPECT_EQ(cuda::launch_moe_wna16_mma(ex, cuda::Wna16Act::BF16, 8, 8, 2, xb, 12, 1, 4, &out, nullptr),
            cudaErrorInvalidValue);  // stride not a multiple of 8
  cuda::MoeWna16Experts ex4 = ex;
  ex4.tile_m = 4;
  EXPECT_EQ(cuda::launch_moe_wna16_mma(ex4, cuda::Wna16Act::BF16, 8, 8, 2, xb, 8, 1, 4, &out, nullptr),
            cudaErrorInvalidValue);  // the GEMV's tile
}

#endif  // QLM_WITH_CUDA

}  // namespace
}  // namespace qlm
