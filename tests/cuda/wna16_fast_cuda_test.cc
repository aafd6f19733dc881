// `cuda_wna16_fast` against the float64 CPU oracle (cpu_ref) on fresh random standard-form weights.
// Suites named Cuda* need a GPU and skip without one; Wna16FastLayout* checks the host repacking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/graph.h"
#include "kernels/cuda/wna16_fast_layout.h"
#include "kernels/cuda/wna16_fast_paths.h"
#include "kernels/mp_linear.h"
#include "tests/kernels/wna16_random.h"
#include "tests/support/cuda_test_util.h"

namespace qlm {
namespace {

using testing::Wna16Spec;

constexpr double kHalfTolerance = 1e-2;  // mean relative error, F16 / BF16 activations and output

class CudaWna16FastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto devices = cuda_devices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    capability_ = devices[0].capability;
  }

  void TearDown() override {
    set_wna16_fast_path(Wna16FastPath::Auto);
    set_wna16_wgmma_tile(-1);
    set_wna16_wgmma_late(-1);
    set_wna16_wgmma_one_group(-1);
    set_wna16_wgmma_pair(0);
    set_wna16_wgmma_producers(0);
    set_wna16_stream_max_stages(0);
    set_wna16_stream_producers(0);
    set_wna16_fixup_mode(0);
    set_wna16_wgmma_natural_x(-1);
    set_wna16_wgmma_staged_y(-1);
    set_wna16_wgmma_head_first(-1);
    set_wna16_wgmma_blocks(0);
  }

  // For switches that only reorder or restage the work: each spec prepared once per act dtype, then for every M and
  // every `cases` entry (applied by `each_case` before the runs) the outputs of `setting(1)` and `setting(0)` on the
  // same x (and bias at odd M) compared bit for bit, NaN-poisoned, with no non-finite value left. The launches read
  // the setting, so one prepared layer runs both.
  void expect_same_bits(
      const std::string& what, const std::vector<Wna16Spec>& specs, const std::vector<int64_t>& Ms,
      const std::function<void(int)>& setting, const std::vector<int>& cases = {0},
      const std::function<void(int)>& each_case = [](int) {}) {
    for (const auto& s : specs)
      for (DType act : {DType::BF16, DType::F16}) {
        const auto gen = testing::random_wna16(s);
        auto kernel = MPKernelRegistry::instance()
                          .find("cuda_wna16_fast")
                          ->create(testing::wna16_config(s, act, Device::cuda(0), capability_));
        kernel->prepare(gen.weights);
        const Tensor bias =
            Tensor::from_vector(testing::random_floats(s.N, s.seed + 3), {s.N}).to_device(Device::cuda(0));
        for (int64_t M : Ms)
          for (int c : cases) {
            SCOPED_TRACE(
                fmt::format("{} {} act={} M={} case={}", what, testing::wna16_spec_str(s), dtype_name(act), M, c));
            each_case(c);
            const Tensor x =
                Tensor::from_vector(testing::random_floats(static_cast<size_t>(M * s.K), s.seed + 7 * M), {M, s.K})
                    .to(act)
                    .to_device(Device::cuda(0));
            const auto output = [&](int on) {
              setting(on);
              Tensor y = testing::nan_poisoned(M, s.N, act, Device::cuda(0));
              kernel->run(x, y, M % 2 == 1 ? &bias : nullptr);
              return y.to_device(Device::cpu()).to_float_vector();
            };
            const std::vector<float> a = output(1), b = output(0);
            ASSERT_EQ(a.size(), b.size());
            EXPECT_EQ(testing::first_non_finite(a.data(), static_cast<int64_t>(a.size())), -1);
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
          }
      }
  }

  // Runs `spec` through cuda_wna16_fast on `path` (Auto: the run-time rule) for every M.
  void check(const Wna16Spec& spec, DType act, const std::vector<int64_t>& Ms,
             Wna16FastPath path = Wna16FastPath::Auto) {
    SCOPED_TRACE(
        fmt::format("{} act={} path={}", testing::wna16_spec_str(spec), dtype_name(act), static_cast<int>(path)));
    set_wna16_fast_path(path);
    const auto gen = testing::random_wna16(spec);
    bits_ = spec.bits;
    if (path != Wna16FastPath::Auto) {  // the forced path is the one that runs (or its documented fallback)
      auto kernel = MPKernelRegistry::instance()
                        .find("cuda_wna16_fast")
                        ->create(testing::wna16_config(spec, act, Device::cuda(0), capability_));
      kernel->prepare(gen.weights);
      for (int64_t M : Ms) EXPECT_EQ(kernel->path(M), expected_path(path, M)) << "M=" << M;
    }
    testing::run_wna16_against_cpu_ref("cuda_wna16_fast", spec, gen.weights, act, Device::cuda(0), capability_, Ms,
                                       [](int64_t, const std::vector<float>& got, const std::vector<float>& want) {
                                         EXPECT_LE(testing::mean_relative_error(got, want), kHalfTolerance);
                                       });
  }

  // What path(M) reports with `path` forced: the stream kernel runs M <= 32 on sm_90, else tiled.
  std::string expected_path(Wna16FastPath path, int64_t M) const {  // bits_: of the spec being checked
    switch (path) {
      case Wna16FastPath::Gemv: return "gemv";
      case Wna16FastPath::Cublas: return "dequant+cublas";
      case Wna16FastPath::Stream: return M <= 32 && capability_ >= 90 ? "stream" : "tiled";
      case Wna16FastPath::Wgmma: return bits_ == 4 && capability_ == 90 && wna16_wgmma_compiled() ? "wgmma" : "tiled";
      default: return "tiled";
    }
  }

  int capability_ = 0;
  int bits_ = 4;
};

using testing::Wna16GridParam;

class CudaWna16FastGrid : public CudaWna16FastTest, public ::testing::WithParamInterface<Wna16GridParam> {};

// Every weight configuration in both act dtypes (K and N not multiples of 256): the tiled GEMM on
// M covering its m-tiles of 8, 16, 32 and 64 tokens (one and several m-tiles, odd M), the GEMV
// kernel and the dequantize + cuBLAS path on a few M each, and the run-time rule.
TEST_P(CudaWna16FastGrid, MatchesReference) {
  const auto p = GetParam();
  const int index = p.bits * 100 + static_cast<int>(p.group) + p.zp * 2 + p.act;
  Wna16Spec s;
  s.bits = p.bits;
  s.K = index % 2 ? 1152 : 480;  // divisible by 32, 96 and 160 / 96
  const int64_t Ns[] = {200, 328, 203};
  s.N = Ns[index % 3];
  s.group_size = p.group;
  if (p.group == 0) s.group_size = s.K == 1152 ? 96 : 160;  // a non-power-of-two divisor
  s.zero_points = p.zp;
  s.act_order = p.act;
  s.seed = static_cast<uint64_t>(index + 17);
  for (DType act : {DType::BF16, DType::F16}) {
    check(s, act, {1, 3, 16, 17, 33, 64, 129, 300}, Wna16FastPath::Tiled);
    check(s, act, {1, 7, 17}, Wna16FastPath::Gemv);
    check(s, act, {1, 5, 8, 9, 16, 17, 32}, Wna16FastPath::Stream);
    check(s, act, {1, 9, 33, 64, 65, 129, 300}, Wna16FastPath::Wgmma);
    check(s, act, {5, 130}, Wna16FastPath::Cublas);
    check(s, act, {2, 40});
  }
}

INSTANTIATE_TEST_SUITE_P(CudaWna16FastAll, CudaWna16FastGrid,
                         ::testing::ValuesIn(testing::wna16_grid({4, 8}, {-1, 32, 64, 128, 0})),
                         [](const auto& info) { return testing::wna16_grid_name(info.param); });

// Groups that are not multiples of 16 (padded rows), odd K and tiny or odd N; long K (split-K).
TEST_F(CudaWna16FastTest, PaddedGroupsOddShapesAndSplitK) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = false, .act_order = false, .seed = 2},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 5},
      {.bits = 8, .K = 7, .N = 1, .group_size = -1, .zero_points = false, .act_order = false, .seed = 6},
      {.bits = 4, .K = 1, .N = 5, .group_size = -1, .zero_points = true, .act_order = false, .seed = 7},
      {.bits = 4, .K = 4096, .N = 1000, .group_size = 128, .zero_points = true, .act_order = true, .seed = 10},
      {.bits = 4, .K = 8192, .N = 520, .group_size = 128, .zero_points = false, .act_order = false, .seed = 11},
      {.bits = 8, .K = 6144, .N = 300, .group_size = -1, .seed = 12},
  };
  for (const auto& s : specs) {
    check(s, DType::BF16, {1, 5, 16, 40, 70, 300}, Wna16FastPath::Tiled);
    check(s, DType::F16, {2, 9, 31, 65}, Wna16FastPath::Tiled);
    check(s, DType::BF16, {1, 5, 16, 40}, Wna16FastPath::Gemv);
    check(s, DType::F16, {2, 9}, Wna16FastPath::Gemv);
    check(s, DType::BF16, {1, 8, 13, 31}, Wna16FastPath::Stream);
    check(s, DType::F16, {2, 16, 32}, Wna16FastPath::Stream);
    check(s, DType::BF16, {1, 17, 64, 100, 128, 200}, Wna16FastPath::Wgmma);
    check(s, DType::F16, {3, 65, 129}, Wna16FastPath::Wgmma);
  }
}

// The stream kernel's work split: one block per stage (every tile cut into segments summed by the last),
// whole tiles per block (written directly), and ranges crossing tile boundaries; misaligned x (gathered).
TEST_F(CudaWna16FastTest, StreamSegmentsAndTiles) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 128, .N = 4000, .group_size = 128, .seed = 21},  // 16 tiles of one stage: direct writes
      {.bits = 8, .K = 64, .N = 300, .group_size = 32, .zero_points = true, .seed = 22},
      {.bits = 4, .K = 2048, .N = 40000, .group_size = 64, .seed = 23},  // 157 tiles x 16 stages over the SMs
      {.bits = 4, .K = 16384, .N = 64, .group_size = 128, .zero_points = true, .seed = 24},  // one tile, many blocks
      {.bits = 8, .K = 3072, .N = 777, .group_size = -1, .seed = 25},
      {.bits = 4, .K = 256, .N = 512, .group_size = 16, .zero_points = true, .seed = 26},  // a group per k-tile
  };
  for (const auto& s : specs) {
    check(s, DType::BF16, {1, 3, 8, 16, 24}, Wna16FastPath::Stream);
    check(s, DType::F16, {1, 11, 32}, Wna16FastPath::Stream);
    check(s, DType::BF16, {1, 64, 65, 200}, Wna16FastPath::Wgmma);  // the same segment and tile edges
  }
}

// The stream kernel's ring and producer tests' layers (seeds seed, seed + 1, ...): g128 (one scale group per stage),
// g32 with zero points and act-order, odd groups, 8-bit.
static std::vector<Wna16Spec> stream_specs(uint64_t seed) {
  return {
      {.bits = 4, .K = 4096, .N = 600, .group_size = 128, .seed = seed},
      {.bits = 4, .K = 2048, .N = 333, .group_size = 32, .zero_points = true, .act_order = true, .seed = seed + 1},
      {.bits = 4, .K = 1440, .N = 264, .group_size = 160, .seed = seed + 2},
      {.bits = 8, .K = 1152, .N = 200, .group_size = 64, .zero_points = true, .seed = seed + 3},
  };
}

// The stream kernel at every ring depth a cap can give (wna16_stream_ring_stages: 3, 6, 9, 12 at one m-tile, 2-12
// even at two, every depth at four and with 8-bit weights): one, two and four m-tiles, late scaling with one scale
// group per stage (g128), with groups of 2 k-tiles (g32, zero points, act-order) and odd groups, against the
// reference. A depth that broke the consumers' parity waits (4 at one m-tile) failed in the model with a launch
// error (docs/w4a16-kernel-notes.md, v7g).
TEST_F(CudaWna16FastTest, StreamEveryRingDepth) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  const std::vector<Wna16Spec> specs = stream_specs(61);
  for (int cap = 2; cap <= kWna16StreamMaxStages; ++cap) {
    SCOPED_TRACE(fmt::format("ring cap {}", cap));
    set_wna16_stream_max_stages(cap);
    for (const auto& s : specs) check(s, DType::BF16, {1, 5, 8, 9, 16, 17, 32}, Wna16FastPath::Stream);
  }
  check(specs[0], DType::F16, {1, 3, 12}, Wna16FastPath::Stream);
}

// One, two and three (the default) producer warps owning the ring's slots: one, two and four m-tiles, g128, g32 with
// zero points and act-order, 8-bit, odd groups, at the default ring and the shallowest (2 slots: a third warp
// issues nothing). Three warps taking stages in turn on the 4-slot ring of two m-tiles failed with a launch error
// on the 70B / 8B layers (session 33); these small layers had not shown it, tests/kernels/ring_schedule_test.cc does.
TEST_F(CudaWna16FastTest, StreamProducerWarps) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  const std::vector<Wna16Spec> specs = stream_specs(81);
  for (int producers : {1, 2, 3}) {
    for (int cap : {0, 2}) {
      SCOPED_TRACE(fmt::format("producers {}, ring cap {}", producers, cap));
      set_wna16_stream_producers(producers);
      set_wna16_stream_max_stages(cap);
      for (const auto& s : specs) check(s, DType::BF16, {1, 5, 9, 16, 17, 32}, Wna16FastPath::Stream);
    }
  }
  check(specs[0], DType::F16, {2, 12}, Wna16FastPath::Stream);
}

// Late scaling in the wgmma tiles of <= 32 tokens (sm90a; off by default until measured): each small tile
// forced with it on, on layers whose scale groups are whole 8-k-tile stages (g128, g256, channelwise with
// K a multiple of 128: the only layers it runs on), symmetric and zero points, act-order, both act dtypes,
// one to five m-tiles.
TEST_F(CudaWna16FastTest, WgmmaLateSmallTiles) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  set_wna16_wgmma_late(1);
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 41},
      {.bits = 4, .K = 1024, .N = 333, .group_size = 128, .zero_points = true, .act_order = true, .seed = 42},
      {.bits = 4, .K = 2048, .N = 520, .group_size = 256, .zero_points = true, .seed = 43},
      {.bits = 4, .K = 512, .N = 130, .group_size = -1, .seed = 44},
  };
  for (int tile : {3, 4, 5}) {
    SCOPED_TRACE(fmt::format("tile {}", tile));
    set_wna16_wgmma_tile(tile);
    for (const auto& s : specs) {
      check(s, DType::BF16, {1, 9, 16, 17, 32, 33, 70}, Wna16FastPath::Wgmma);
      check(s, DType::F16, {3, 16, 40}, Wna16FastPath::Wgmma);
    }
  }
}

// The wgmma kernel's one-group-per-stage consumer loop (sm90a; on by default where it applies): every tile
// forced with it on, on layers whose stages each lie inside one scale group — g128, g256,
// channelwise with K a multiple of 128 and with a partial last stage (K = 520: 33 k-tiles) — symmetric and zero
// points, act-order, both act dtypes, one to five m-tiles; then the general loop forced on the same layers (it
// still runs wherever QLM_WGMMA_ONE_GROUP=0, and on every layer with groups of fewer than 8 k-tiles).
TEST_F(CudaWna16FastTest, WgmmaOneGroupLoop) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  set_wna16_wgmma_one_group(1);
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 51},
      {.bits = 4, .K = 1024, .N = 333, .group_size = 128, .zero_points = true, .act_order = true, .seed = 52},
      {.bits = 4, .K = 2048, .N = 520, .group_size = 256, .zero_points = true, .seed = 53},
      {.bits = 4, .K = 520, .N = 130, .group_size = -1, .seed = 54},
      {.bits = 4, .K = 4096, .N = 200, .group_size = -1, .zero_points = true, .seed = 55},
  };
  for (const auto& s : specs) {  // the layers are ones the loop runs on (else this would test the general loop)
    const Wna16FastLayout L = pack_wna16_fast(testing::random_wna16(s).weights, true);
    ASSERT_TRUE(cuda::wna16_wgmma_stages_in_one_group(L.tiles_per_group, L.k_tiles)) << testing::wna16_spec_str(s);
  }
  for (int tile : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
    SCOPED_TRACE(fmt::format("tile {}", tile));
    set_wna16_wgmma_tile(tile);
    for (const auto& s : specs) {
      check(s, DType::BF16, {1, 9, 33, 64, 65, 129, 300}, Wna16FastPath::Wgmma);
      check(s, DType::F16, {5, 70}, Wna16FastPath::Wgmma);
    }
  }
  set_wna16_wgmma_one_group(0);
  for (int tile : {0, 1, 5, 6, 9, 10, 11, 12}) {
    SCOPED_TRACE(fmt::format("general loop, tile {}", tile));
    set_wna16_wgmma_tile(tile);
    for (const auto& s : specs) check(s, DType::BF16, {2, 40, 129}, Wna16FastPath::Wgmma);
  }
}

// Column tiles in pairs (clusters of two blocks multicasting the token tile): every tile configuration on layers
// with odd and even column-tile counts (an odd count leaves the last pair's second tile past N), the one-group,
// general and late loops, both act dtypes, M from 1 to 300, against the CPU reference.
TEST_F(CudaWna16FastTest, WgmmaPairs) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  set_wna16_wgmma_pair(2);
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 61},
      {.bits = 4, .K = 1024, .N = 520, .group_size = 128, .zero_points = true, .act_order = true, .seed = 62},
      {.bits = 4, .K = 520, .N = 130, .group_size = -1, .seed = 63},
      {.bits = 4, .K = 2048, .N = 333, .group_size = 32, .zero_points = true, .seed = 64},  // the general loop
  };
  const Wna16FastLayout L = pack_wna16_fast(testing::random_wna16(specs[0]).weights, true);
  for (int tile : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
    SCOPED_TRACE(fmt::format("tile {}", tile));
    // What the device holds at once (the pairs' grid; printed for the notes): clusters of 2 vs blocks / 2.
    const int pairs = wna16_wgmma_resident_clusters(L.k_tiles, L.n_blocks, L.tiles_per_group, true, tile, 2);
    const int singles = wna16_wgmma_resident_clusters(L.k_tiles, L.n_blocks, L.tiles_per_group, true, tile, 1);
    std::printf("tile %d: resident clusters of 2: %d, of 1: %d\n", tile, pairs, singles);
    EXPECT_GE(pairs, 1);
    set_wna16_wgmma_tile(tile);
    for (const auto& s : specs) {
      check(s, DType::BF16, {1, 9, 33, 64, 65, 129, 300}, Wna16FastPath::Wgmma);
      check(s, DType::F16, {5, 70}, Wna16FastPath::Wgmma);
    }
  }
  set_wna16_wgmma_late(1);
  for (int tile : {3, 5}) {
    SCOPED_TRACE(fmt::format("late, tile {}", tile));
    set_wna16_wgmma_tile(tile);
    check(specs[0], DType::BF16, {3, 16}, Wna16FastPath::Wgmma);
  }
  set_wna16_wgmma_late(-1);
  set_wna16_wgmma_pair(0);
}

// One to four producer warps, each owning ring slots (ring_slot_producer; more warps than slots issue nothing), on
// the tiles with a producer warpgroup (6-9) and two producer warps (10), and the value clamped to one warp on the
// others: every tile configuration, both loops, zero points and act-order. Stages handed out in turn instead broke 4
// warps on the 3-slot 128 x 256 tile (a launch failure here, session 33).
TEST_F(CudaWna16FastTest, WgmmaProducers) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 71},
      {.bits = 4, .K = 1024, .N = 520, .group_size = 128, .zero_points = true, .act_order = true, .seed = 72},
      {.bits = 4, .K = 2048, .N = 333, .group_size = 32, .zero_points = true, .seed = 73},  // the general loop
  };
  for (int producers : {1, 2, 3, 4}) {
    set_wna16_wgmma_producers(producers);
    for (int tile : {0, 6, 7, 8, 9, 10, 11, 12}) {
      SCOPED_TRACE(fmt::format("producers {}, tile {}", producers, tile));
      set_wna16_wgmma_tile(tile);
      for (const auto& s : specs) {
        check(s, DType::BF16, {1, 33, 64, 129, 300}, Wna16FastPath::Wgmma);
        check(s, DType::F16, {70}, Wna16FastPath::Wgmma);
      }
    }
  }
}

// x in its own k order (the consumers exchange the code words' bytes within quads) and x permuted into the words'
// order by a kernel first: every tile configuration in both on the one-group loop, zero points, act-order (x
// gathered), K not a multiple of 16 (the tensor map's zero fill past x's own columns); the general loop (g32) and
// the late loop of the small-token tiles, which permute x either way; against the CPU reference.
TEST_F(CudaWna16FastTest, WgmmaNaturalX) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 520, .N = 130, .group_size = -1, .seed = 101},
      {.bits = 4, .K = 1024, .N = 333, .group_size = 128, .zero_points = true, .act_order = true, .seed = 102},
      {.bits = 4, .K = 2048, .N = 520, .group_size = 32, .zero_points = true, .seed = 103},  // the general loop
      {.bits = 4, .K = 1000, .N = 264, .group_size = -1, .zero_points = true, .seed = 104},
  };
  for (int natural : {1, 0}) {
    set_wna16_wgmma_natural_x(natural);
    for (int tile : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
      SCOPED_TRACE(fmt::format("natural x {}, tile {}", natural, tile));
      set_wna16_wgmma_tile(tile);
      for (const auto& s : specs) check(s, DType::BF16, {1, 17, 33, 64, 129}, Wna16FastPath::Wgmma);
      check(specs[1], DType::F16, {70}, Wna16FastPath::Wgmma);
    }
    set_wna16_wgmma_late(1);
    for (int tile : {3, 4, 5, 11}) {
      SCOPED_TRACE(fmt::format("late loop, natural x {}, tile {}", natural, tile));
      set_wna16_wgmma_tile(tile);
      check(specs[1], DType::BF16, {9, 32, 40}, Wna16FastPath::Wgmma);
    }
    set_wna16_wgmma_late(-1);
  }
}

// Split tiles counted with fences in every thread (QLM_W4FAST_FIXUP=1; the default, 2, one thread's acq_rel atomic
// between two barriers, runs in every other test): the stream kernel at one, two and four m-tiles and the wgmma
// tiles the rule runs (64 x 128, 64 x 384, 128 x 192, 128 x 256), whose small layers here are split over many
// blocks, against the reference.
TEST_F(CudaWna16FastTest, FenceFixup) {
  if (capability_ < 90) GTEST_SKIP() << "the stream kernel needs sm_90";
  set_wna16_fixup_mode(1);
  ASSERT_EQ(cuda::wna16_fixup_mode(), 1);
  for (const auto& s : stream_specs(91)) check(s, DType::BF16, {1, 5, 9, 16, 17, 32}, Wna16FastPath::Stream);
  if (capability_ != 90 || !wna16_wgmma_compiled()) return;
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 2048, .N = 1000, .group_size = 128, .seed = 92},
      {.bits = 4, .K = 1024, .N = 520, .group_size = 128, .zero_points = true, .act_order = true, .seed = 93},
      {.bits = 4, .K = 2048, .N = 333, .group_size = 32, .zero_points = true, .seed = 94},
  };
  for (int tile : {1, 6, 8, 9, 10, 12}) {
    SCOPED_TRACE(fmt::format("tile {}", tile));
    set_wna16_wgmma_tile(tile);
    for (const auto& s : specs) check(s, DType::BF16, {33, 64, 129, 300}, Wna16FastPath::Wgmma);
  }
  check(specs[0], DType::F16, {70}, Wna16FastPath::Wgmma);
}

// y written through a ring slot in 16-byte pieces (the default) and 2 bytes at a time from the accumulators: the same
// bits on every tile configuration, the one-group, general and late loops, zero points and act-order, both act
// dtypes, with and without a bias, M from 1 to 300 (one to several token tiles, split and whole tiles), single blocks
// and pairs; N = 333 takes the direct stores either way (N % 8 != 0). The other wgmma tests check the default against
// the CPU reference.
TEST_F(CudaWna16FastTest, WgmmaStagedYIsBitIdentical) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 111},
      {.bits = 4, .K = 1024, .N = 520, .group_size = 128, .zero_points = true, .act_order = true, .seed = 112},
      {.bits = 4, .K = 2048, .N = 336, .group_size = 32, .zero_points = true, .seed = 113},  // the general loop
      {.bits = 4, .K = 520, .N = 333, .group_size = -1, .seed = 114},
  };
  set_wna16_fast_path(Wna16FastPath::Wgmma);
  const auto compare = [&](const std::string& what, const std::vector<int64_t>& Ms, const std::vector<Wna16Spec>& ss) {
    expect_same_bits(what, ss, Ms, [](int staged) { set_wna16_wgmma_staged_y(staged); });
  };
  for (int tile : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
    set_wna16_wgmma_tile(tile);
    compare(fmt::format("tile {}", tile), {1, 9, 33, 64, 65, 129, 300}, specs);
  }
  set_wna16_wgmma_late(1);
  for (int tile : {3, 4, 5, 11}) {
    set_wna16_wgmma_tile(tile);
    compare(fmt::format("late, tile {}", tile), {3, 16, 32}, {specs[0]});
  }
  set_wna16_wgmma_late(-1);
  // Pairs: the held slot is also one the peer's multicast refills.
  set_wna16_wgmma_pair(2);
  for (int tile : {3, 5, 8, 9, 12}) {
    set_wna16_wgmma_tile(tile);
    compare(fmt::format("pairs, tile {}", tile), {5, 64, 300}, {specs[0], specs[1]});
  }
}

// Head first (stream_k_walk.h: each block walks its split tiles' segments before its whole tiles) only reorders a
// block's stages, so the outputs must be the same bits as in order. Grids of a few blocks (set_wna16_wgmma_blocks) make
// every block cover two to five tiles, its share starting and ending inside tiles; pairs too.
TEST_F(CudaWna16FastTest, WgmmaHeadFirstIsBitIdentical) {
  if (capability_ != 90 || !wna16_wgmma_compiled()) GTEST_SKIP() << "needs sm_90 and the sm_90a kernels";
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 1152, .N = 1000, .group_size = 128, .seed = 121},
      {.bits = 4, .K = 1024, .N = 520, .group_size = 128, .zero_points = true, .act_order = true, .seed = 122},
      {.bits = 4, .K = 2048, .N = 336, .group_size = 32, .zero_points = true, .seed = 123},  // the general loop
  };
  set_wna16_fast_path(Wna16FastPath::Wgmma);
  const auto compare = [&](const std::string& what, const std::vector<int64_t>& Ms, const std::vector<int>& grids) {
    expect_same_bits(
        what, specs, Ms, [](int head_first) { set_wna16_wgmma_head_first(head_first); }, grids,
        [](int blocks) { set_wna16_wgmma_blocks(blocks); });
  };
  for (int tile : {1, 6, 9, 10, 12}) {
    set_wna16_wgmma_tile(tile);
    compare(fmt::format("tile {}", tile), {65, 129, 300}, {3, 5, 7});
  }
  set_wna16_wgmma_pair(2);
  for (int tile : {9, 12}) {
    set_wna16_wgmma_tile(tile);
    compare(fmt::format("pairs, tile {}", tile), {129, 300}, {3, 5});
  }
}

// The rule's own choice: on the H200 the wgmma path from M = 33 up to the cuBLAS bound (1536 on a layer
// of 4e7 weights), matching the reference; elsewhere the tiled path up to 128, then cuBLAS.
TEST_F(CudaWna16FastTest, AutoRuleRunsWgmma) {
  const Wna16Spec s{.bits = 4, .K = 8192, .N = 5000, .group_size = 128, .zero_points = true, .seed = 31};
  const auto gen = testing::random_wna16(s);
  auto kernel = MPKernelRegistry::instance()
                    .find("cuda_wna16_fast")
                    ->create(testing::wna16_config(s, DType::BF16, Device::cuda(0), capability_));
  kernel->prepare(gen.weights);
  const bool wgmma = capability_ == 90 && wna16_wgmma_compiled();
  EXPECT_EQ(kernel->path(32), "tiled");
  EXPECT_EQ(kernel->path(33), wgmma ? "wgmma" : "tiled");
  EXPECT_EQ(kernel->path(127), wgmma ? "wgmma" : "tiled");
  EXPECT_EQ(kernel->path(128), wgmma ? "wgmma" : "dequant+cublas");
  EXPECT_EQ(kernel->path(767), wgmma ? "wgmma" : "dequant+cublas");
  EXPECT_EQ(kernel->path(1023), wgmma ? "wgmma" : "dequant+cublas");
  EXPECT_EQ(kernel->path(1535), wgmma ? "wgmma" : "dequant+cublas");
  EXPECT_EQ(kernel->path(1536), "dequant+cublas");
  testing::run_wna16_against_cpu_ref("cuda_wna16_fast", s, gen.weights, DType::BF16, Device::cuda(0), capability_,
                                     {33, 77, 300},
                                     [](int64_t, const std::vector<float>& got, const std::vector<float>& want) {
                                       EXPECT_LE(testing::mean_relative_error(got, want), kHalfTolerance);
                                     });
}

TEST_F(CudaWna16FastTest, SelectedForCudaLayers) {
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 1024, .group_size = 128};
  const auto cfg = testing::wna16_config(s, DType::BF16, Device::cuda(0), capability_);
  auto [entry, sel] = MPKernelRegistry::instance().select(cfg, DeviceType::CUDA, "auto", "mixed-precision linear", "l");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->name, "cuda_wna16_fast");
}

// A decode-sized call captured into a CUDA graph right after prepare() (the model's decode step after a
// prefill that ran on another path) holds kernels only: the split-K counters were zeroed in prepare(), so
// no memset node is replayed before every call.
TEST_F(CudaWna16FastTest, DecodeCallsCaptureOnlyKernels) {
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 768, .group_size = 128, .seed = 9};
  const auto gen = testing::random_wna16(s);
  for (const Wna16FastPath path :
       {Wna16FastPath::Auto, Wna16FastPath::Tiled, Wna16FastPath::Stream, Wna16FastPath::Gemv, Wna16FastPath::Wgmma})
    for (const int64_t M : {1, 16}) {
      set_wna16_fast_path(path);
      auto kernel = MPKernelRegistry::instance()
                        .find("cuda_wna16_fast")
                        ->create(testing::wna16_config(s, DType::BF16, Device::cuda(0), capability_));
      kernel->prepare(gen.weights);
      const Tensor x = Tensor::zeros({M, s.K}, DType::BF16, Device::cuda(0));
      Tensor y = Tensor::empty({M, s.N}, DType::BF16, Device::cuda(0));
      std::string why;
      const auto graph = cuda::CapturedGraph::capture(
          0, [&] { kernel->run(x, y, nullptr); }, &why);
      ASSERT_TRUE(graph) << why;
      EXPECT_EQ(graph->node_summary().find("memset"), std::string::npos)
          << kernel->path(M) << " M=" << M << ": " << graph->node_summary();
    }
}

TEST_F(CudaWna16FastTest, WrongArgumentsAreRejected) {
  const Wna16Spec s{.bits = 4, .K = 64, .N = 32, .group_size = 32, .seed = 5};
  const auto gen = testing::random_wna16(s);
  const auto cfg = testing::wna16_config(s, DType::F16, Device::cuda(0), capability_);
  auto kernel = MPKernelRegistry::instance().find("cuda_wna16_fast")->create(cfg);
  kernel->prepare(gen.weights);
  Tensor y = Tensor::zeros({2, 32}, DType::F16, Device::cuda(0));
  Tensor x_wrong_k = Tensor::zeros({2, 63}, DType::F16, Device::cuda(0));
  EXPECT_THROW(kernel->run(x_wrong_k, y, nullptr), Error);
  Tensor x_wrong_dtype = Tensor::zeros({2, 64}, DType::BF16, Device::cuda(0));
  EXPECT_THROW(kernel->run(x_wrong_dtype, y, nullptr), Error);
}

// ---- No GPU needed ----

TEST(Wna16FastRegistry, CanImplementGivesReasons) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const auto* e = MPKernelRegistry::instance().find("cuda_wna16_fast");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->device, DeviceType::CUDA);
  EXPECT_EQ(e->priority, 20);
  const Wna16Spec s{.bits = 4, .K = 4096, .N = 1024, .group_size = 128};
  const auto ok = testing::wna16_config(s, DType::BF16, Device::cuda(0), 90);
  EXPECT_FALSE(e->can_implement(ok).has_value());
  auto expect_reason = [&](MPLinearLayerConfig c, const std::string& fragment) {
    const auto why = e->can_implement(c);
    ASSERT_TRUE(why.has_value()) << c.describe();
    EXPECT_NE(why->find(fragment), std::string::npos) << *why;
  };
  auto c = ok;
  c.device = Device::cpu();
  expect_reason(c, "CUDA only");
  c = ok;
  c.capability = 75;
  expect_reason(c, "capability");
  for (int bits : {2, 3}) {
    c = ok;
    c.weight_type = PackedIntType{bits, 1 << (bits - 1)};
    expect_reason(c, "bits");
  }
  c = ok;
  c.act_dtype = DType::F32;
  expect_reason(c, "activation dtype");
  c = ok;
  c.group_size = 0;
  expect_reason(c, "group size");
  // What cuda_wna16_fast refuses, cuda_wna16 takes.
  c = ok;
  c.act_dtype = DType::F32;
  auto [entry, sel] = MPKernelRegistry::instance().select(c, DeviceType::CUDA, "cuda", "mixed-precision linear", "l");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->name, "cuda_wna16");
}

// The stream kernel's ring depth: the smaller of what fits and the cap, rounded down to a multiple of the consumer
// warp phases (the parity waits' invariant), 0 where fewer than max(2, phases) stages remain; every combination.
TEST(Wna16FastPaths, StreamRingStages) {
  for (int phases = 1; phases <= 3; ++phases)
    for (int fit = -1; fit <= 14; ++fit)
      for (int cap = 2; cap <= kWna16StreamMaxStages; ++cap) {
        const int stages = wna16_stream_ring_stages(fit, cap, phases);
        const int bound = std::min(fit, cap);
        SCOPED_TRACE(::testing::Message() << "fit " << fit << " cap " << cap << " phases " << phases);
        if (bound < std::max(2, phases)) {
          EXPECT_EQ(stages, 0);
          continue;
        }
        EXPECT_EQ(stages % phases, 0);
        EXPECT_LE(stages, bound);
        EXPECT_GT(stages + phases, bound);  // the largest such multiple
        EXPECT_GE(stages, 2);
      }
  EXPECT_EQ(wna16_stream_ring_stages(11, 12, 3), 9);  // QLM_W4FAST_STREAM_MAX_STAGES=12, 8 tokens of g128: 11 fit
  EXPECT_EQ(wna16_stream_ring_stages(12, 4, 3), 3);   // QLM_W4FAST_STREAM_MAX_STAGES=4 at one m-tile
  EXPECT_EQ(wna16_stream_ring_stages(9, 12, 2), 8);   // two m-tiles, 16 tokens of g128: 9 fit
  EXPECT_EQ(wna16_stream_ring_stages(5, 12, 1), 5);
  EXPECT_EQ(wna16_stream_default_stages(1), 6);
  EXPECT_EQ(wna16_stream_default_stages(2), 4);
  EXPECT_EQ(wna16_stream_default_stages(4), kWna16StreamMaxStages);
}

// Programmatic dependent launch of the wgmma GEMM only on grids whose busiest multiprocessor cannot get more
// blocks than the even placement gives it.
TEST(Wna16FastPaths, WgmmaPdlGrid) {
  EXPECT_TRUE(wna16_wgmma_pdl_grid(1, 1, 132));  // one block per SM at most: never packed
  EXPECT_TRUE(wna16_wgmma_pdl_grid(132, 1, 132));
  EXPECT_FALSE(wna16_wgmma_pdl_grid(128, 2, 132));  // 8b.o at M = 64: one each spread, two each packed
  EXPECT_FALSE(wna16_wgmma_pdl_grid(132, 2, 132));
  EXPECT_TRUE(wna16_wgmma_pdl_grid(133, 2, 132));  // some SM holds two either way
  EXPECT_TRUE(wna16_wgmma_pdl_grid(264, 2, 132));
  EXPECT_FALSE(wna16_wgmma_pdl_grid(256, 3, 132));  // 8b.o at M = 17 (3 per SM): 2 each spread, 3 packed
  EXPECT_TRUE(wna16_wgmma_pdl_grid(265, 3, 132));
  EXPECT_FALSE(wna16_wgmma_pdl_grid(264, 1, 0));  // SM count unknown
}

// The wgmma ring's default cap: 3 / 4 stages on the 128-token tiles of 256 / fewer columns, the kernel's 8 on the
// others.
TEST(Wna16FastPaths, WgmmaDefaultStages) {
  EXPECT_EQ(wna16_wgmma_default_stages(16, 128), 8);
  EXPECT_EQ(wna16_wgmma_default_stages(64, 384), 8);
  EXPECT_EQ(wna16_wgmma_default_stages(127, 256), 8);
  EXPECT_EQ(wna16_wgmma_default_stages(128, 128), 4);
  EXPECT_EQ(wna16_wgmma_default_stages(128, 192), 4);
  EXPECT_EQ(wna16_wgmma_default_stages(128, 256), 3);
  for (const cuda::Wna16WgmmaTile& t : cuda::kWna16WgmmaTiles) {
    const int cap = wna16_wgmma_default_stages(t.tokens, t.columns());
    EXPECT_TRUE(cap >= 2 && cap <= 8) << t.tokens << " x " << t.columns();
  }
}

// Persistent stream-K grids whose shares start and end on tile boundaries (or split tiles evenly), if that keeps 7/8
// of the blocks.
TEST(Wna16FastPaths, AlignedGrid) {
  EXPECT_EQ(wna16_aligned_grid(64, 264), 256);   // 70b.o, 64 x 128 tiles: 4 segments per tile
  EXPECT_EQ(wna16_aligned_grid(32, 264), 256);   // 8b.down: 8 per tile
  EXPECT_EQ(wna16_aligned_grid(80, 264), 240);   // 70b.qkv: 3 per tile
  EXPECT_EQ(wna16_aligned_grid(32, 132), 128);   // stream kernel, 70b.o
  EXPECT_EQ(wna16_aligned_grid(22, 132), 132);   // already aligned: 6 per tile
  EXPECT_EQ(wna16_aligned_grid(224, 132), 132);  // 70b.gate_up: 112 blocks of 2 tiles would align, too few
  EXPECT_EQ(wna16_aligned_grid(224, 132, 800), 112);
  EXPECT_EQ(wna16_aligned_grid(150, 132), 132);  // nothing in [116, 132]
  EXPECT_EQ(wna16_aligned_grid(86, 132), 132);
  EXPECT_EQ(wna16_aligned_grid(7, 7), 7);
  EXPECT_EQ(wna16_aligned_grid(5, 1), 1);
  EXPECT_EQ(wna16_aligned_grid(5, 0), 1);
  // The small-layer grid: the most blocks under 3/4 of the SMs that split every tile into the same number of
  // segments, two at least; from 2 tokens on layers of < 6e7 weights.
  EXPECT_EQ(wna16_stream_small_grid(16, 132), 96);      // 8b.o: 6 segments per tile
  EXPECT_EQ(wna16_stream_small_grid(24, 132), 96);      // 8b.qkv: 4
  EXPECT_EQ(wna16_stream_small_grid(14, 132), 98);      // N = 3584: 7
  EXPECT_EQ(wna16_stream_small_grid(12, 132), 96);      // N = 3072: 8
  EXPECT_EQ(wna16_stream_small_grid(40, 132, 600), 0);  // one block per tile: keep the aligned grid
  EXPECT_EQ(wna16_stream_small_grid(64, 132), 0);       // 3072 x 16384: the same
  EXPECT_EQ(wna16_stream_small_grid(112, 132), 0);      // fewer blocks than tiles
  EXPECT_EQ(wna16_stream_small_grid(16, 132, 0), 0);
  EXPECT_EQ(wna16_stream_small_grid(0, 132), 0);
  EXPECT_EQ(wna16_stream_small_grid(16, 16), 0);
  EXPECT_TRUE(wna16_stream_small_grid_layer(2, 4096, 4096));
  EXPECT_TRUE(wna16_stream_small_grid_layer(16, 14336, 4096));  // 5.9e7 weights
  EXPECT_FALSE(wna16_stream_small_grid_layer(1, 4096, 4096));
  EXPECT_FALSE(wna16_stream_small_grid_layer(16, 8192, 8192));  // 6.7e7
  // The stream kernel's share: layers below 2e8 weights may drop to 80 % of the SMs for an aligned grid.
  EXPECT_EQ(wna16_stream_aligned_keep(4096, 28672), 800);
  EXPECT_EQ(wna16_stream_aligned_keep(8192, 57344), 875);
  EXPECT_EQ(wna16_aligned_grid(112, 132, wna16_stream_aligned_keep(4096, 28672)), 112);  // 8b.gate_up: a tile each
  EXPECT_EQ(wna16_aligned_grid(224, 132, wna16_stream_aligned_keep(8192, 57344)), 132);
  // Whatever it returns: within [7/8 cap, cap], and either cap or a multiple or divisor of the tile count.
  for (int64_t tiles : {1, 3, 17, 40, 64, 150, 1000}) {
    for (int64_t cap : {1, 2, 100, 132, 264}) {
      const int64_t g = wna16_aligned_grid(tiles, cap);
      EXPECT_LE(g, cap);
      EXPECT_GE(8 * g, 7 * cap);
      if (g != cap) {
        EXPECT_TRUE(g % tiles == 0 || tiles % g == 0) << tiles << " " << cap;
      }
    }
  }
  // What the kernels make of an aligned grid: block b's stream-K share [b T / G, (b + 1) T / G) of T = tiles x P
  // stages ends on a tile boundary or inside the tile it started in (it never writes partial sums of a tile it did
  // not start), and the segments of a split tile differ by one stage at most.
  for (int64_t tiles : {3, 22, 32, 40, 64, 80, 112}) {
    for (int64_t per_tile : {7, 32, 64, 112, 224}) {
      const int64_t T = tiles * per_tile, g = wna16_aligned_grid(tiles, 132);
      if (g % tiles != 0 && tiles % g != 0) continue;  // not aligned: nothing promised
      int64_t shortest = T, longest = 0;
      for (int64_t b = 0; b < g; ++b) {
        const int64_t begin = b * T / g, end = (b + 1) * T / g;
        EXPECT_TRUE(end % per_tile == 0 || (end - 1) / per_tile == begin / per_tile) << tiles << " " << per_tile;
        if (g > tiles) shortest = std::min(shortest, end - begin), longest = std::max(longest, end - begin);
      }
      if (g > tiles) {
        EXPECT_LE(longest - shortest, 1) << tiles << " " << per_tile;
      }
    }
  }
}

// The wgmma grid: aligned where that keeps 7/8 of the blocks, else blocks of an odd number of half tiles where that
// adds at most 1/8 of a tile to each block.
TEST(Wna16FastPaths, WgmmaGridSplitsTilesInHalves) {
  EXPECT_EQ(wna16_wgmma_grid(320, 132), 128);  // 70b.qkv at 1024 tokens, 256 x 128 tiles: 2.42 -> 2.5 tiles a block
  EXPECT_EQ(wna16_wgmma_grid(320, 132, 875, false), 132);
  EXPECT_EQ(wna16_wgmma_grid(448, 132), 128);   // 70b.gate_up at 256: 3.39 -> 3.5
  EXPECT_EQ(wna16_wgmma_grid(192, 132), 128);   // 1.45 -> 1.5
  EXPECT_EQ(wna16_wgmma_grid(300, 132), 132);   // 120 blocks would add 0.23 of a tile
  EXPECT_EQ(wna16_wgmma_grid(1344, 132), 132);  // 128 would add 0.32
  EXPECT_EQ(wna16_wgmma_grid(256, 132), 128);   // aligned: 2 whole tiles a block
  EXPECT_EQ(wna16_wgmma_grid(80, 264), 240);    // aligned: 3 segments a tile
  EXPECT_EQ(wna16_wgmma_grid(150, 132), 132);   // 300 half tiles: no divisor in [116, 132]
  EXPECT_EQ(wna16_wgmma_grid(112, 264), 264);   // 224 blocks of half a tile: too few
  EXPECT_EQ(wna16_wgmma_grid(5, 1), 1);
  // Every block of a half-tile grid covers an odd number of half tiles: one partial at most.
  for (int64_t tiles = 1; tiles <= 600; ++tiles)
    for (int64_t cap : {7, 66, 114, 132, 264}) {
      const int64_t g = wna16_wgmma_grid(tiles, cap);
      ASSERT_TRUE(g >= 1 && g <= cap) << tiles << " " << cap;
      if (g == wna16_aligned_grid(tiles, cap) || g == cap) continue;
      EXPECT_EQ(2 * tiles % g, 0) << tiles << " " << cap;
      EXPECT_EQ(2 * tiles / g % 2, 1) << tiles << " " << cap;
      EXPECT_LE(8 * tiles * (cap - g), g * cap) << tiles << " " << cap;
      EXPECT_GE(1000 * g, 875 * cap) << tiles << " " << cap;
      // Block b's stream-K share [b T / G, (b + 1) T / G) of T = tiles x per_tile stages starts or ends on a tile
      // boundary, odd per_tile (halves that fall inside a stage) included.
      for (int64_t per_tile : {7, 64}) {
        const int64_t T = tiles * per_tile;
        for (int64_t b = 0; b < g; ++b)
          ASSERT_TRUE(b * T / g % per_tile == 0 || (b + 1) * T / g % per_tile == 0)
              << tiles << " " << cap << " " << per_tile << " block " << b;
      }
    }
}

// Where the wgmma kernel's one-group loop may run: stages of 8 k-tiles inside one scale group.
TEST(Wna16FastPaths, StagesInOneGroup) {
  EXPECT_TRUE(cuda::wna16_wgmma_stages_in_one_group(8, 512));   // g128
  EXPECT_TRUE(cuda::wna16_wgmma_stages_in_one_group(16, 512));  // g256
  EXPECT_TRUE(cuda::wna16_wgmma_stages_in_one_group(33, 33));   // channelwise, K = 520: a partial last stage
  EXPECT_FALSE(cuda::wna16_wgmma_stages_in_one_group(4, 512));  // g64: two groups per stage
  EXPECT_FALSE(cuda::wna16_wgmma_stages_in_one_group(6, 36));   // g96: groups across stage boundaries
  EXPECT_FALSE(cuda::wna16_wgmma_stages_in_one_group(12, 24));  // two groups of 12: stage 1 spans both
}

// The 4-bit GEMV kernel's full-wave test (2 blocks per multiprocessor, >= 8 k-tiles per warp) and its place in
// the rule: 4-bit, M <= 8, only with a known SM count. On 132 SMs (H200): the Llama-3 o and down layers fill one
// wave (64 column blocks x 4 splits, 128 x 2), qkv and gate_up do not (96 x 2 = 192 of 264 slots, 160 x 1, 448 >
// 264); a short K leaves too few k-tiles per warp.
TEST(Wna16FastPaths, Gemv4FullWave) {
  EXPECT_TRUE(wna16_gemv4_full_wave(4096, 4096, 132));    // 8b.o
  EXPECT_TRUE(wna16_gemv4_full_wave(14336, 4096, 132));   // 8b.down
  EXPECT_TRUE(wna16_gemv4_full_wave(8192, 8192, 132));    // 70b.o
  EXPECT_TRUE(wna16_gemv4_full_wave(28672, 8192, 132));   // 70b.down
  EXPECT_FALSE(wna16_gemv4_full_wave(4096, 6144, 132));   // 8b.qkv
  EXPECT_FALSE(wna16_gemv4_full_wave(8192, 10240, 132));  // 70b.qkv
  EXPECT_FALSE(wna16_gemv4_full_wave(4096, 28672, 132));  // 8b.gate_up
  EXPECT_FALSE(wna16_gemv4_full_wave(8192, 57344, 132));  // 70b.gate_up
  EXPECT_FALSE(wna16_gemv4_full_wave(1024, 4096, 132));   // 64 k-tiles over 4 splits: 2 per warp
  EXPECT_FALSE(wna16_gemv4_full_wave(8192, 8192, 0));     // SM count unknown
  EXPECT_TRUE(wna16_gemv4_full_wave(8192, 7680, 60));     // 120 blocks in 120 slots, 512 k-tiles
  // The share as a parameter (QLM_W4FAST_GEMV_ONE_TOKEN_WAVE for one token): 8b.qkv's 96 x 2 = 192 of 264 slots
  // (73 %) passes at 70 (the one-token default), not at 74 or the full wave's 90; 70b.qkv's 160 (61 %) does not.
  EXPECT_TRUE(wna16_gemv4_one_wave(4096, 6144, 132, 70));
  EXPECT_FALSE(wna16_gemv4_one_wave(4096, 6144, 132, 74));
  EXPECT_TRUE(wna16_gemv4_one_wave(4096, 6144, 132, kWna16Gemv4OneTokenWavePercent));
  EXPECT_FALSE(wna16_gemv4_one_wave(4096, 6144, 132, kWna16Gemv4FullWavePercent));
  EXPECT_FALSE(wna16_gemv4_one_wave(8192, 10240, 132, 70));
  EXPECT_FALSE(wna16_gemv4_one_wave(4096, 6144, 0, 70));
  EXPECT_TRUE(wna16_gemv4_one_wave(8192, 8192, 132, kWna16Gemv4OneTokenWavePercent));  // 70b.o: 256 of 264
  // The rule gives them the GEMV kernel only where the stream kernel cannot run (stream_ok false): session 32's
  // stream kernel leads on every layer at M = 1-8 (v7k).
  for (int64_t M : {1, 4, 8}) {
    EXPECT_EQ(wna16_fast_path_for(M, 8192, 8192, 4, false, true, 132), Wna16FastPath::Gemv) << M;
    EXPECT_EQ(wna16_fast_path_for(M, 28672, 8192, 4, false, true, 132), Wna16FastPath::Gemv) << M;
    EXPECT_EQ(wna16_fast_path_for(M, 8192, 8192, 4, true, true, 132), Wna16FastPath::Stream) << M;
    EXPECT_EQ(wna16_fast_path_for(M, 28672, 8192, 4, true, true, 132), Wna16FastPath::Stream) << M;
    EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4, true, true, 132), Wna16FastPath::Stream) << M;
    EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4, false, true, 132), Wna16FastPath::Tiled) << M;  // not a wave
  }
  EXPECT_EQ(wna16_fast_path_for(9, 8192, 8192, 4, false, true, 132), Wna16FastPath::Tiled);  // GEMV: M <= 8
  // 8b.qkv (73 % of a wave): without the stream kernel the GEMV kernel at M = 1 (its one-token share, 70 %), tiled
  // from 2 (the full wave's 90 % does not hold); with it, stream at every M <= 16 and size.
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 6144, 4, false, true, 132), Wna16FastPath::Gemv);
  EXPECT_EQ(wna16_fast_path_for(2, 4096, 6144, 4, false, true, 132), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 6144, 4, false, true, 0), Wna16FastPath::Tiled);  // SM count unknown
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 6144, 4, true, true, 132), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 6144, 4, true, true, 0), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 6144, 8, true, true, 132), Wna16FastPath::Gemv);  // 8-bit: its own bound
  EXPECT_EQ(wna16_fast_path_for(1, 8192, 8192, 8, true, true, 132), Wna16FastPath::Gemv);
  EXPECT_NE(wna16_fast_path_summary(8192, 8192, 4, true, true, 132).find("M 1-16 stream"), std::string::npos)
      << wna16_fast_path_summary(8192, 8192, 4, true, true, 132);
  EXPECT_NE(wna16_fast_path_summary(8192, 8192, 4, false, true, 132).find("M 1-8 gemv"), std::string::npos)
      << wna16_fast_path_summary(8192, 8192, 4, false, true, 132);
}

// The run-time rule: stream for 4-bit M <= 16 (where the GPU can run it), GEMV for 8-bit M <= 8, tiled
// up to the cuBLAS bound, dequantize + cuBLAS for large M (earlier on small layers); the override forces
// one path and is undone by Auto. (Environment overrides are not set in tests.)
TEST(Wna16FastPaths, RuleAndOverride) {
  for (int64_t M : {1, 4, 8, 9, 12, 16}) EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4), Wna16FastPath::Stream) << M;
  for (int64_t M : {17, 64, 128}) EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4), Wna16FastPath::Tiled) << M;
  EXPECT_EQ(wna16_fast_path_for(1, 8192, 10240, 4), Wna16FastPath::Stream);  // K * N = 8.4e7
  EXPECT_EQ(wna16_fast_path_for(16, 8192, 10240, 4), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(17, 8192, 10240, 4), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(16, 28672, 8192, 4), Wna16FastPath::Stream);  // 2.3e8
  EXPECT_EQ(wna16_fast_path_for(17, 28672, 8192, 4), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(1, 8192, 8192, 4), Wna16FastPath::Stream);  // every size from M = 1 (v7k)
  EXPECT_EQ(wna16_fast_path_for(2, 8192, 8192, 4), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(1, 4096, 4096, 4), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(16, 4096, 4096, 4), Wna16FastPath::Stream);  // 1.7e7
  EXPECT_EQ(wna16_fast_path_for(17, 4096, 4096, 4), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(1, 8192, 8192, 4, false), Wna16FastPath::Tiled);  // no stream kernel here
  EXPECT_EQ(wna16_fast_path_for(8, 4096, 28672, 4), Wna16FastPath::Stream);       // 1.2e8
  EXPECT_EQ(wna16_fast_path_for(16, 4096, 28672, 4), Wna16FastPath::Stream);
  for (int64_t M : {256, 1024, 100000}) EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4), Wna16FastPath::Cublas) << M;
  EXPECT_EQ(wna16_fast_path_for(64, 8192, 8192, 4), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(128, 8192, 8192, 4), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(32, 4096, 6144, 4), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(64, 4096, 6144, 4), Wna16FastPath::Cublas);
  for (auto p : {Wna16FastPath::Gemv, Wna16FastPath::Tiled, Wna16FastPath::Cublas, Wna16FastPath::Stream,
                 Wna16FastPath::Wgmma}) {
    set_wna16_fast_path(p);
    EXPECT_EQ(wna16_fast_path_for(1, 4096, 4096, 4), p);
    EXPECT_EQ(wna16_fast_path_for(4096, 4096, 4096, 4), p);
  }
  set_wna16_fast_path(Wna16FastPath::Auto);
  EXPECT_EQ(wna16_fast_path_for(7, 4096, 4096, 4), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(4, 8192, 57344, 8), Wna16FastPath::Gemv);  // 8-bit: GEMV up to M = 8
  EXPECT_EQ(wna16_fast_path_for(8, 8192, 57344, 8), Wna16FastPath::Gemv);
  EXPECT_EQ(wna16_fast_path_for(17, 8192, 57344, 8), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(4, 8192, 57344, 8, false), Wna16FastPath::Gemv);
  EXPECT_EQ(wna16_fast_path_for(8, 8192, 57344, 4, false), Wna16FastPath::Tiled);
  // Where the wgmma kernel can run: 4-bit, from M = 33 to the cuBLAS bound (2560 / 2048 / 1024 / 192 / 65 on
  // layers of >= 4e8 / 2e8 / 4e7 / 2e7 / fewer weights), and below 33 where its small-token tiles beat the tiled
  // kernel (v7d): from M = 9 on >= 4e8, 17 on >= 7.5e7 and on [6e7, 7.5e7) with N >= 8192, 16 on < 3e7 weights with
  // N <= 4096 — where the stream kernel leaves them (above M = 16, or everywhere when it cannot run).
  for (int64_t M : {17, 24, 33, 48, 64, 256, 383, 639, 1024, 2559})
    EXPECT_EQ(wna16_fast_path_for(M, 8192, 57344, 4, true, true), Wna16FastPath::Wgmma) << M;
  EXPECT_EQ(wna16_fast_path_for(16, 8192, 57344, 4, true, true), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(9, 8192, 57344, 4, false, true), Wna16FastPath::Wgmma);  // no stream kernel here
  EXPECT_EQ(wna16_fast_path_for(8, 8192, 57344, 4, true, true), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(8, 4096, 4096, 4, true, true), Wna16FastPath::Stream);  // 1.7e7, SM count unknown
  EXPECT_EQ(wna16_fast_path_for(8, 4096, 4096, 4, false, true), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(4, 8192, 57344, 4, true, true), Wna16FastPath::Stream);
  EXPECT_EQ(wna16_fast_path_for(2560, 8192, 57344, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(2559, 28672, 8192, 4, true, true), Wna16FastPath::Wgmma);  // 2.3e8 (v7x: was 2047)
  EXPECT_EQ(wna16_fast_path_for(2560, 28672, 8192, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(1535, 4096, 28672, 4, true, true), Wna16FastPath::Wgmma);  // 1.2e8 (v7x: was 1023)
  EXPECT_EQ(wna16_fast_path_for(1536, 4096, 28672, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(1535, 14336, 4096, 4, true, true), Wna16FastPath::Wgmma);  // 5.9e7
  EXPECT_EQ(wna16_fast_path_for(1536, 14336, 4096, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(16, 28672, 8192, 4, true, true), Wna16FastPath::Stream);  // 2.3e8 weights
  EXPECT_EQ(wna16_fast_path_for(17, 28672, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(16, 8192, 8192, 4, true, true), Wna16FastPath::Stream);  // 6.7e7
  EXPECT_EQ(wna16_fast_path_for(9, 8192, 8192, 4, false, true), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(17, 8192, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(17, 13824, 5120, 4, true, true), Wna16FastPath::Tiled);  // 7.1e7, N < 8192
  EXPECT_EQ(wna16_fast_path_for(33, 13824, 5120, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(33, 8192, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(127, 8192, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1535, 8192, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1536, 8192, 8192, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(16, 4096, 6144, 4, true, true), Wna16FastPath::Stream);  // 2.5e7
  EXPECT_EQ(wna16_fast_path_for(17, 4096, 6144, 4, true, true), Wna16FastPath::Tiled);   // N > 4096: no 16 x 128
  EXPECT_EQ(wna16_fast_path_for(32, 4096, 6144, 4, true, true), Wna16FastPath::Tiled);
  EXPECT_EQ(wna16_fast_path_for(33, 4096, 6144, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1535, 4096, 6144, 4, true, true), Wna16FastPath::Wgmma);  // v7x: 1535, was 256
  EXPECT_EQ(wna16_fast_path_for(1536, 4096, 6144, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(64, 4096, 4096, 4, true, true), Wna16FastPath::Wgmma);  // 1.7e7
  EXPECT_EQ(wna16_fast_path_for(65, 4096, 4096, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_wgmma_rule_tile(16, 8192, 57344), 3);
  EXPECT_EQ(wna16_wgmma_rule_tile(24, 8192, 57344), 11);  // 32 x 256, two producers
  EXPECT_EQ(wna16_wgmma_rule_tile(40, 8192, 57344), 8);   // >= 1e8: 64 x 384
  EXPECT_EQ(wna16_wgmma_rule_tile(64, 4096, 28672), 8);
  EXPECT_EQ(wna16_wgmma_rule_tile(64, 8192, 10240), 10);  // 64 x 128, two producers
  EXPECT_EQ(wna16_wgmma_rule_tile(40, 8192, 8192), 10);
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 4096, 4096), 10);
  EXPECT_EQ(wna16_wgmma_rule_tile(16, 4096, 4096), 5);
  EXPECT_EQ(wna16_wgmma_rule_tile(65, 4096, 6144), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(65, 28672, 8192), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(65, 8192, 57344), 6);  // 4.7e8: 128 x 256 above 64 tokens
  EXPECT_EQ(wna16_wgmma_rule_tile(191, 28672, 8192), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(192, 28672, 8192), 12);  // 2.3e8: from 192 (256 x 128: the same padding)
  EXPECT_EQ(wna16_wgmma_rule_tile(256, 28672, 8192), 12);  // 256 x 128 where 256-token tiles pad no more
  EXPECT_EQ(wna16_wgmma_rule_tile(129, 8192, 57344), 12);
  EXPECT_EQ(wna16_wgmma_rule_tile(128, 8192, 57344), 6);
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 8192, 57344), 12);
  EXPECT_EQ(wna16_wgmma_rule_tile(1100, 8192, 57344), 6);        // 1100 % 256 = 76: 128-token tiles pad less
  EXPECT_EQ(wna16_wgmma_rule_tile(256, 8192, 10240), 9);         // 8.4e7: never 256 x 128
  EXPECT_EQ(wna16_wgmma_rule_tile(1000, 4096, 28672), 9);        // 1.2e8: not below 1024 tokens
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 4096, 28672), 12);       // [4e7, 2e8) from 1024 at whole 256-token tiles (v7y)
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 14336, 4096, 132), 12);  // N < 8192: where its 128 tiles go whole (v8a)
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 14336, 4096), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(1535, 8192, 8192), 12);  // past 128 of a partial tile on N >= 8192
  EXPECT_EQ(wna16_wgmma_rule_tile(1535, 14336, 4096), 9);  // not on N = 4096
  EXPECT_EQ(wna16_wgmma_rule_tile(1100, 8192, 10240), 9);  // 1100 % 256 = 76
  EXPECT_EQ(wna16_wgmma_rule_tile(768, 8192, 8192), 9);    // below 1024: the 128-token tiles
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 4096, 6144), 9);   // 2.5e7: below 4e7, unchanged
  EXPECT_EQ(wna16_wgmma_rule_tile(100, 8192, 8192), 9);    // 6.7e7
  EXPECT_EQ(wna16_wgmma_rule_tile(100, 14336, 4096), 9);   // 5.9e7
  EXPECT_EQ(wna16_wgmma_rule_tile(12, 8192, 8192), -1);    // 6.7e7: t3 only on >= 4e8 (v7d)
  EXPECT_EQ(wna16_wgmma_rule_tile(12, 8192, 57344), 3);
  EXPECT_EQ(wna16_wgmma_rule_tile(8, 8192, 57344), -1);
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 8192, 8192), 10);   // [6e7, 7.5e7) with N >= 8192: 64 x 128, two producers
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 13824, 5120), -1);  // [6e7, 7.5e7) narrower: tiled
  EXPECT_EQ(wna16_wgmma_rule_tile(16, 4096, 4096), 5);    // < 3e7, N <= 4096
  EXPECT_EQ(wna16_wgmma_rule_tile(15, 4096, 4096), -1);
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 5120, 5120), -1);  // < 3e7, N > 4096: tiled
  EXPECT_EQ(wna16_wgmma_rule_tile(33, 5120, 5120), 10);
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 8192, 10240), 11);  // 8.4e7: 32 x 256, two producers
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 4096, 28672), 11);  // 1.2e8
  EXPECT_EQ(wna16_wgmma_rule_tile(20, 14336, 4096), -1);  // 5.9e7: the tiled kernel
  EXPECT_EQ(wna16_wgmma_rule_tile(8, 8192, 8192), -1);
  EXPECT_EQ(wna16_fast_path_for(1535, 8192, 10240, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1536, 8192, 10240, 4, true, true), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(64, 8192, 57344, 8, true, true), Wna16FastPath::Tiled);  // 8-bit: no wgmma
}

// Tiles that go whole to the blocks of the aligned grid: its size divides the tile count.
TEST(Wna16FastPaths, WholeTiles) {
  EXPECT_TRUE(wna16_whole_tiles(128, 132));   // 128 blocks of one tile
  EXPECT_TRUE(wna16_whole_tiles(256, 132));   // 128 blocks of two
  EXPECT_TRUE(wna16_whole_tiles(120, 132));   // 120 >= 87.5 % of 132
  EXPECT_TRUE(wna16_whole_tiles(896, 132));   // 128 blocks of seven
  EXPECT_FALSE(wna16_whole_tiles(64, 132));   // 128 blocks, each tile split in two
  EXPECT_FALSE(wna16_whole_tiles(172, 132));  // no G in [116, 132] divides 172
  EXPECT_FALSE(wna16_whole_tiles(112, 132));  // 112 < 87.5 % of 132: the full grid, tiles split
  EXPECT_TRUE(wna16_whole_tiles(112, 132, 800));
  EXPECT_FALSE(wna16_whole_tiles(0, 132));
  EXPECT_FALSE(wna16_whole_tiles(128, 0));
}

// Above 64 tokens on layers of [4e7, 2e8) weights: the 128 x 256 tile where its tiles go whole to an aligned grid
// of the SM count and the 128 x 192 tile's do not (v7l); otherwise, and with the SM count unknown, the 128 x 192 tile
// up to the bound (1536 since v7x; before, 1024, raised to 1536 only where the 128 x 256 tiles went whole).
TEST(Wna16FastPaths, WgmmaWholeTileRule) {
  constexpr int kSms = 132;
  EXPECT_EQ(wna16_wgmma_rule_tile(512, 8192, 8192, kSms), 6);  // 70b.o: 4 x 32 = 128 tiles vs 4 x 43 = 172
  EXPECT_EQ(wna16_wgmma_rule_tile(385, 8192, 8192, kSms), 6);
  EXPECT_EQ(wna16_wgmma_rule_tile(384, 8192, 8192, kSms), 9);     // 96 tiles split vs 129 whole
  EXPECT_EQ(wna16_wgmma_rule_tile(256, 8192, 8192, kSms), 9);     // 64 tiles split in two
  EXPECT_EQ(wna16_wgmma_rule_tile(768, 8192, 8192, kSms), 9);     // 192 split vs 258 whole (129 blocks of two)
  EXPECT_EQ(wna16_wgmma_rule_tile(512, 8192, 8192), 9);           // SM count unknown
  EXPECT_EQ(wna16_wgmma_rule_tile(384, 8192, 10240, kSms), 6);    // 70b.qkv: 120 vs 162
  EXPECT_EQ(wna16_wgmma_rule_tile(512, 8192, 10240, kSms), 9);    // 160 vs 216: neither
  EXPECT_EQ(wna16_wgmma_rule_tile(768, 8192, 10240, kSms), 6);    // 240 (120 of two) vs 324
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 14336, 4096, kSms), 12);  // 8b.down: 256 x 128 from 1024 (v7y)
  EXPECT_EQ(wna16_wgmma_rule_tile(512, 14336, 4096, kSms), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 4096, 28672, kSms), 12);  // 8b.gate_up: 256 x 128 from 1024 (v7y)
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 4096, 4096, kSms), 9);    // 1.7e7: below the sizes measured
  EXPECT_EQ(wna16_wgmma_rule_tile(128, 28672, 8192, kSms), 9);    // 2.3e8 below 192 tokens: 32 tiles split
  EXPECT_EQ(wna16_wgmma_rule_tile(192, 28672, 8192, kSms), 12);   // and from 192 as before (256 x 128)
  // The cuBLAS bound: 1536 on these layers whether the tiles go whole or not.
  EXPECT_EQ(wna16_fast_path_for(1024, 8192, 8192, 4, true, true, kSms), Wna16FastPath::Wgmma);  // 256 tiles
  EXPECT_EQ(wna16_fast_path_for(1024, 8192, 8192, 4, true, true), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1025, 8192, 8192, 4, true, true, kSms), Wna16FastPath::Wgmma);  // 288 tiles
  EXPECT_EQ(wna16_fast_path_for(1536, 8192, 8192, 4, true, true, kSms), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_for(1024, 14336, 4096, 4, true, true, kSms), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1024, 8192, 10240, 4, true, true, kSms), Wna16FastPath::Wgmma);  // 320: not whole
  EXPECT_EQ(wna16_fast_path_for(1024, 4096, 28672, 4, true, true, kSms), Wna16FastPath::Wgmma);
  EXPECT_EQ(wna16_fast_path_for(1024, 4096, 4096, 4, true, true, kSms), Wna16FastPath::Cublas);
  EXPECT_EQ(wna16_fast_path_summary(8192, 8192, 4, true, true, kSms),
            "M 1-16 stream · 17-64 wgmma 64x128 · 65-384 wgmma 128x192 · 385-512 wgmma "
            "128x256 · 513-896 wgmma 128x192 · 897-1023 wgmma 128x256 · 1024 wgmma 256x128 · "
            "1025-1152 wgmma 128x192 · 1153-1280 wgmma 256x128 · 1281-1408 wgmma 128x192 · "
            "1409-1535 wgmma 256x128 · >= 1536 dequant+cuBLAS");
}

// The rule's paths as ranges of M (`qlm inspect --plan`): every M covered once, in order, ending with the
// dequantize + cuBLAS bound; and each range's path the rule's for both of its ends.
TEST(Wna16FastPaths, SummaryListsTheRulesRanges) {
  EXPECT_EQ(wna16_fast_path_summary(8192, 57344, 4, true, true),
            "M 1-16 stream · 17-32 wgmma 32x256 · 33-64 wgmma 64x384 · 65-128 wgmma 128x256 · "
            "129-2559 wgmma 128x256 or 256x128 (less padding) · >= 2560 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(4096, 4096, 4, true, true),
            "M 1-16 stream · 17-64 wgmma 64x128 · >= 65 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(4096, 4096, 4, false, true),
            "M 1-15 tiled · 16 wgmma 16x128 · 17-64 wgmma 64x128 · >= 65 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(8192, 57344, 4, false, false), "M 1-255 tiled · >= 256 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(8192, 57344, 8, true, true), "M 1-8 gemv · 9-255 tiled · >= 256 dequant+cuBLAS");
  // 8b.qkv on 132 SMs: its GEMV plan fills 73 % of a wave, enough for one token (70 %), not for 2-8 (90 %); the
  // GEMV kernel takes it only without the stream kernel.
  EXPECT_EQ(wna16_fast_path_summary(4096, 6144, 4, true, true, 132),
            "M 1-16 stream · 17-32 tiled · 33-64 wgmma 64x128 · 65-1535 wgmma 128x192 · >= 1536 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(4096, 6144, 4, false, true, 132),
            "M 1 gemv · 2-32 tiled · 33-64 wgmma 64x128 · 65-1535 wgmma 128x192 · >= 1536 dequant+cuBLAS");
  // 8b.down (5.9e7 weights: the tiled kernel at 17-32), and the rule itself at the ranges' ends.
  EXPECT_EQ(wna16_fast_path_summary(14336, 4096, 4, true, true),
            "M 1-16 stream · 17-32 tiled · 33-64 wgmma 64x128 · 65-1535 wgmma 128x192 · >= 1536 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(14336, 4096, 4, true, true, 132),
            "M 1-16 stream · 17-32 tiled · 33-64 wgmma 64x128 · 65-896 wgmma 128x192 · 897-1023 wgmma 128x256 · "
            "1024 wgmma 256x128 · 1025-1535 wgmma 128x192 · >= 1536 dequant+cuBLAS");
  EXPECT_EQ(wna16_fast_path_summary(14336, 4096, 4, false, true, 132),
            "M 1-8 gemv · 9-32 tiled · 33-64 wgmma 64x128 · 65-896 wgmma 128x192 · 897-1023 wgmma 128x256 · "
            "1024 wgmma 256x128 · 1025-1535 wgmma 128x192 · >= 1536 dequant+cuBLAS");
  for (auto [M, path] : {std::pair{16, Wna16FastPath::Stream},
                         {17, Wna16FastPath::Tiled},
                         {32, Wna16FastPath::Tiled},
                         {33, Wna16FastPath::Wgmma},
                         {1535, Wna16FastPath::Wgmma},
                         {1536, Wna16FastPath::Cublas}})
    EXPECT_EQ(wna16_fast_path_for(M, 14336, 4096, 4, true, true), path) << M;
  EXPECT_EQ(wna16_wgmma_rule_tile(64, 14336, 4096), 10);
  // x in its own k order (mode 2, the default): from 33 up to 128 tokens below 2e8 weights and up to 256 below 1e8
  // with N <= 4096, else permuted first (v7n, v7o).
  EXPECT_FALSE(wna16_wgmma_natural_x(16, 4096, 4096));
  EXPECT_TRUE(wna16_wgmma_natural_x(17, 4096, 4096));
  EXPECT_TRUE(wna16_wgmma_natural_x(32, 8192, 10240));
  EXPECT_FALSE(wna16_wgmma_natural_x(32, 8192, 57344));  // >= 2e8: the permutation
  EXPECT_TRUE(wna16_wgmma_natural_x(128, 4096, 28672));
  EXPECT_FALSE(wna16_wgmma_natural_x(129, 4096, 28672));
  EXPECT_TRUE(wna16_wgmma_natural_x(128, 8192, 10240));
  EXPECT_FALSE(wna16_wgmma_natural_x(129, 8192, 10240));
  EXPECT_TRUE(wna16_wgmma_natural_x(256, 14336, 4096));
  EXPECT_FALSE(wna16_wgmma_natural_x(257, 14336, 4096));
  EXPECT_FALSE(wna16_wgmma_natural_x(64, 28672, 8192));
  EXPECT_FALSE(wna16_wgmma_natural_x(33, 8192, 57344));
  // From 1024 tokens where the call runs the 256 x 128 tile on [4e7, 2e8) weights (v8a): at 1024 on the four
  // mid-size Llama-3 layers of a 132-SM GPU.
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{8192, 10240}, {8192, 8192}, {4096, 28672}, {14336, 4096}}) {
    EXPECT_EQ(wna16_wgmma_rule_tile(1024, K, N, 132), 12) << K << " x " << N;
    EXPECT_TRUE(wna16_wgmma_natural_x(1024, K, N, 12)) << K << " x " << N;
    EXPECT_FALSE(wna16_wgmma_natural_x(1024, K, N, 9)) << K << " x " << N;
    EXPECT_FALSE(wna16_wgmma_natural_x(768, K, N, 12)) << K << " x " << N;
  }
  EXPECT_FALSE(wna16_wgmma_natural_x(1024, 8192, 57344, 12));  // >= 2e8
  EXPECT_FALSE(wna16_wgmma_natural_x(1024, 4096, 4096, 12));   // < 4e7
  // The 256 x 128 tile on N < 8192 only where its tiles go whole: 8b.down's 128 at 1024, not its 160 at 1280.
  EXPECT_EQ(wna16_wgmma_rule_tile(1280, 14336, 4096, 132), 9);
  EXPECT_EQ(wna16_wgmma_rule_tile(1024, 14336, 4096, 0), 9);  // SMs unknown: nothing goes whole
  EXPECT_EQ(wna16_wgmma_rule_tile(1280, 8192, 8192, 132), 12);
  set_wna16_wgmma_natural_x(0);
  EXPECT_FALSE(wna16_wgmma_natural_x(33, 4096, 4096));
  set_wna16_wgmma_natural_x(1);
  EXPECT_TRUE(wna16_wgmma_natural_x(1024, 8192, 57344));
  set_wna16_wgmma_natural_x(-1);
  EXPECT_EQ(wna16_wgmma_rule_tile(65, 14336, 4096), 9);
}

TEST(Wna16FastLayout, HalfConversionRoundsToNearestEven) {
  for (bool bf16 : {false, true})
    for (float v : {0.0f, 1.0f, -2.5f, 0.0123f, 1024.0f, 143.0f, 255.0f, 1279.0f, 3.0e-6f, 60000.0f}) {
      const float r = wna16_fast_from_half_bits(wna16_fast_to_half_bits(v, bf16), bf16);
      EXPECT_LE(std::fabs(r - v), std::fabs(v) * (bf16 ? 1.0 / 256 : 1.0 / 2048) + (bf16 ? 0 : 6e-8)) << v;
    }
  EXPECT_EQ(wna16_fast_to_half_bits(1.0f, false), 0x3C00);
  EXPECT_EQ(wna16_fast_to_half_bits(1.0f, true), 0x3F80);
  EXPECT_EQ(wna16_fast_to_half_bits(1024.0f + 255.0f, false), 0x64FF);
}

// Unpacking the layout on the host gives back every code, zero and (act-dtype rounded) scale of the
// standard form, every input row exactly once, and groups on whole k-tiles.
TEST(Wna16FastLayout, RepackedWeightsMatchStandardForm) {
  const std::vector<Wna16Spec> specs = {
      {.bits = 4, .K = 384, .N = 203, .group_size = 128, .zero_points = true, .act_order = false, .seed = 1},
      {.bits = 4, .K = 100, .N = 33, .group_size = 20, .zero_points = true, .act_order = true, .seed = 2},
      {.bits = 4, .K = 480, .N = 70, .group_size = 160, .zero_points = false, .act_order = true, .seed = 3},
      {.bits = 4, .K = 101, .N = 65, .group_size = -1, .zero_points = false, .act_order = false, .seed = 4},
      {.bits = 8, .K = 36, .N = 17, .group_size = 12, .zero_points = true, .act_order = true, .seed = 6},
      {.bits = 8, .K = 256, .N = 130, .group_size = 32, .zero_points = false, .act_order = false, .seed = 7},
      {.bits = 8, .K = 192, .N = 64, .group_size = 96, .zero_points = true, .act_order = false, .seed = 8},
  };
  for (const auto& s : specs)
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(fmt::format("{} bf16={}", testing::wna16_spec_str(s), bf16));
      const auto gen = testing::random_wna16(s);
      const auto& w = gen.weights;
      const Wna16FastLayout L = pack_wna16_fast(w, bf16);
      ASSERT_EQ(L.rows % 16, 0);
      ASSERT_EQ(L.rows, L.groups * L.rows_per_group);
      ASSERT_EQ(L.N_pad % 64, 0);
      ASSERT_EQ(L.codes.size(), static_cast<size_t>(L.N_pad * L.rows * s.bits / 32));
      const int32_t* g_idx = w.g_idx.defined() ? w.g_idx.data<int32_t>() : nullptr;
      const int64_t gs = s.group_size < 0 ? s.K : s.group_size;
      const int32_t* q = w.qweight.data<int32_t>();
      const float* sc = w.scales.data<float>();
      const int32_t* zr = w.zeros.defined() ? w.zeros.data<int32_t>() : nullptr;
      std::vector<int> seen(static_cast<size_t>(s.K), 0);
      for (int64_t j = 0; j < L.rows; ++j) {
        const int32_t r = L.row_source[j];
        if (r < 0) continue;
        ++seen[r];
        const int64_t g = g_idx ? g_idx[r] : r / gs;
        ASSERT_EQ(j / L.rows_per_group, g) << "row " << j;
        for (int64_t n = 0; n < s.N; ++n) {
          const int64_t bit = r * s.bits;
          const uint32_t want = (static_cast<uint32_t>(q[(bit / 32) * s.N + n]) >> (bit % 32)) & ((1u << s.bits) - 1u);
          ASSERT_EQ(wna16_fast_code(L, j, n), want) << "row " << j << " column " << n;
        }
      }
      for (int64_t k = 0; k < s.K; ++k) ASSERT_EQ(seen[k], 1) << "input row " << k;
      for (int64_t g = 0; g < L.groups; ++g)
        for (int64_t n = 0; n < L.N_pad; ++n) {
          if (n >= s.N) {
            ASSERT_EQ(wna16_fast_scale(L, g, n), 0.0f);
            continue;
          }
          const float want_s = wna16_fast_from_half_bits(wna16_fast_to_half_bits(sc[g * s.N + n], bf16), bf16);
          ASSERT_EQ(wna16_fast_scale(L, g, n), want_s) << "group " << g << " column " << n;
          ASSERT_EQ(wna16_fast_zero(L, g, n), zr ? zr[g * s.N + n] : w.weight_type.bias)
              << "group " << g << " column " << n;
        }
      // The scale rounding is the only loss: relative error within half an ulp of the act dtype.
      for (int64_t i = 0; i < std::min<int64_t>(s.N, 16); ++i) {
        const float a = sc[i], b = wna16_fast_scale(L, 0, i);
        EXPECT_LE(std::fabs(a - b), std::fabs(a) * (bf16 ? 1.0 / 256 : 1.0 / 2048));
      }
    }
}

}  // namespace
}  // namespace qlm
