// Multi-process tensor parallelism without a GPU: the broadcast that keeps ranks' sampling in step
// (in-process group), which GPU a joined rank takes, and Model::load's refusals for a joined rank
// that cannot work (before any rendezvous is attempted).
#include <gtest/gtest.h>

#include <vector>

#include "cuda/device.h"
#include "models/model_fixtures.h"
#include "parallel/communicator.h"
#include "parallel/expect_error_all.h"
#include "parallel/nccl_comm.h"
#include "runtime/model.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

TEST(LocalComm, BroadcastCopiesTheRootsTensorToEveryRank) {
  for (int root : {0, 2}) {
    LocalCommGroup group(3);
    std::vector<std::vector<int32_t>> got(3);
    run_on_ranks(3, [&](int r) {
      Tensor t = Tensor::from_vector<int32_t>({100 * r, 100 * r + 1}, {2});
      group.rank(r).broadcast(t, root);
      got[static_cast<size_t>(r)] = {t.data<int32_t>()[0], t.data<int32_t>()[1]};
    });
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)], (std::vector<int32_t>{100 * root, 100 * root + 1}));
  }
}

TEST(LocalComm, BroadcastRefusesABadRootOnEveryRank) {
  LocalCommGroup group(2);
  std::vector<int> threw(2, 0);
  run_on_ranks(2, [&](int r) {
    Tensor t = Tensor::zeros({1}, DType::F32);
    try {
      group.rank(r).broadcast(t, 5);
    } catch (const Error& e) {
      threw[static_cast<size_t>(r)] = e.code() == "comm.rank";
    }
  });
  EXPECT_EQ(threw, (std::vector<int>{1, 1}));
}

runtime::ModelOptions joined(int rank, int tp) {
  runtime::ModelOptions o;
  o.device = Device::cuda(0);
  o.tp = tp;
  o.tp_rank = rank;
  o.rendezvous = "/tmp/qlm-never-used";
  return o;
}

TEST(TpRankDevice, RankModuloVisibleGpusFromTheDevicesIndex) {
  EXPECT_EQ(runtime::tp_rank_device(joined(0, 2), 8), Device::cuda(0));
  EXPECT_EQ(runtime::tp_rank_device(joined(1, 2), 8), Device::cuda(1));
  EXPECT_EQ(runtime::tp_rank_device(joined(5, 8), 4), Device::cuda(1));  // 4 GPUs per host: local index
  runtime::ModelOptions o = joined(1, 2);
  o.device = Device::cuda(2);  // --device cuda:2: ranks on cuda:2, cuda:3 as in one process
  EXPECT_EQ(runtime::tp_rank_device(o, 4), Device::cuda(3));
  EXPECT_EQ(runtime::tp_rank_device(o, 3), Device::cuda(0));
}

TEST(TpRankDevice, ExplicitGpuWinsAndMustExist) {
  runtime::ModelOptions o = joined(3, 4);
  o.tp_gpu = 1;
  EXPECT_EQ(runtime::tp_rank_device(o, 2), Device::cuda(1));
  o.tp_gpu = 2;
  EXPECT_QLM_ERROR_ALL(runtime::tp_rank_device(o, 2), "model.tp", "given GPU cuda:2", "2 CUDA device(s) are visible",
                       "--tp-gpu 0 .. 1");
  EXPECT_QLM_ERROR_ALL(runtime::tp_rank_device(joined(0, 2), 0), "device.unavailable", "no CUDA device is visible");
}

TEST(JoinedRankLoad, RefusesWhatCannotWork) {
  const auto dir = testing::model_fixture_root() / "llama-gqa";
  EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, joined(0, 1)), "model.tp", "tensor-parallel size is 1");
  EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, joined(2, 2)), "model.tp", "rank 2 is outside the group of 2",
                       "0 .. 1");
  runtime::ModelOptions cpu = joined(1, 2);
  cpu.device = Device::cpu();
  EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, cpu), "model.tp", "needs CUDA and NCCL", "device is cpu");
  runtime::ModelOptions no_rendezvous = joined(1, 2);
  no_rendezvous.rendezvous.clear();
  EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, no_rendezvous), "model.tp", "no rendezvous");
}

TEST(JoinedRankLoad, WithoutTheBackendOrAGpuSaysSo) {
  if (!cuda_devices().empty()) GTEST_SKIP() << "a GPU is visible: CudaTpProcs covers joined ranks";
  const auto dir = testing::model_fixture_root() / "llama-gqa";
  if (!cuda_backend_built())
    EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, joined(1, 2)), "device.unavailable", "without the CUDA backend");
  else if (!nccl_available())
    EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, joined(1, 2)), "model.tp", "NCCL");
  else
    EXPECT_QLM_ERROR_ALL(runtime::Model::load(dir, joined(1, 2)), "device.unavailable", "no CUDA device is visible");
}

}  // namespace
}  // namespace qlm
