// The NCCL communicator: the file bootstrap (no GPU needed), and on a GPU the collectives with one
// rank (identity) and, with two GPUs, two ranks in two threads against the in-process group's
// results. Two ranks cannot share one GPU (NCCL refuses duplicate devices).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "cuda/device.h"
#include "parallel/communicator.h"
#include "parallel/nccl_comm.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

using namespace std::chrono_literals;

NcclId pattern_id(char seed) {
  NcclId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(seed + static_cast<char>(i * 7));
  return id;
}

TEST(NcclBootstrap, PublishedIdIsReadBack) {
  testing::TempDir dir;
  const auto path = dir.path() / "nccl.id";
  const NcclId id = pattern_id(3);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);  // the reader starts first and waits
    publish_nccl_id(path, id);
  });
  const NcclId got = wait_for_nccl_id(path, 5000ms);
  writer.join();
  EXPECT_EQ(got, id);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(NcclBootstrap, MissingIdTimesOutNamingThePath) {
  testing::TempDir dir;
  const auto path = dir.path() / "never.id";
  EXPECT_QLM_ERROR(wait_for_nccl_id(path, 60ms), "comm.bootstrap", "never.id");
}

TEST(NcclBootstrap, UnwritableDirectoryIsAClearError) {
  EXPECT_QLM_ERROR(publish_nccl_id("/nonexistent-dir-for-qlm/nccl.id", pattern_id(1)), "comm.bootstrap",
                   "cannot write");
}

TEST(NcclBootstrap, BuildsWithoutNcclSayWhy) {
  if (nccl_available()) GTEST_SKIP() << "this build has NCCL";
  EXPECT_QLM_ERROR(make_nccl_id(), "comm.unavailable", "NCCL");
}

Tensor filled(Shape shape, float base, Device device) {
  Tensor t = Tensor::empty(shape, DType::F32);
  auto v = t.span<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return t.to_device(device);
}

TEST(CudaNccl, OneRankCollectivesAreIdentities) {
  if (cuda_devices().empty() || !nccl_available()) GTEST_SKIP() << "needs a GPU and NCCL";
  auto comm = make_nccl_communicator(make_nccl_id(), 0, 1, 0);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  Tensor t = filled({3, 5}, 1.0f, Device::cuda(0));
  comm->all_reduce_sum(t);
  EXPECT_EQ(t.to_device(Device::cpu()).to_float_vector(), filled({3, 5}, 1.0f, Device::cpu()).to_float_vector());
  for (int dim : {0, 1}) {
    const Tensor g = comm->all_gather(filled({3, 5}, 2.0f, Device::cuda(0)), dim);
    EXPECT_EQ(g.shape(), (Shape{3, 5}));
    EXPECT_EQ(g.to_device(Device::cpu()).to_float_vector(), filled({3, 5}, 2.0f, Device::cpu()).to_float_vector());
  }
  comm->barrier();
  EXPECT_QLM_ERROR(comm->all_reduce_sum(t = filled({2}, 0.0f, Device::cpu())), "comm.device", "cuda:0");
}

TEST(CudaNccl, TwoRanksMatchTheInProcessGroup) {
  if (cuda_devices().size() < 2 || !nccl_available()) GTEST_SKIP() << "needs 2 GPUs and NCCL";
  const NcclId id = make_nccl_id();
  LocalCommGroup local(2);
  std::vector<std::vector<float>> reduced(2), reduced_ref(2), gathered(2), gathered_ref(2);
  run_on_ranks(2, [&](int r) {
    auto comm = make_nccl_communicator(id, r, 2, r);
    Tensor t = filled({4, 3}, 10.0f * static_cast<float>(r + 1), Device::cuda(r));
    comm->all_reduce_sum(t);
    reduced[r] = t.to_device(Device::cpu()).to_float_vector();
    Tensor h = filled({4, 3}, 10.0f * static_cast<float>(r + 1), Device::cpu());
    local.rank(r).all_reduce_sum(h);
    reduced_ref[r] = h.to_float_vector();
    gathered[r] = comm->all_gather(filled({4, 3}, 100.0f * static_cast<float>(r), Device::cuda(r)), 1)
                      .to_device(Device::cpu())
                      .to_float_vector();
    gathered_ref[r] = local.rank(r).all_gather(filled({4, 3}, 100.0f * static_cast<float>(r), Device::cpu()), 1)
                          .to_float_vector();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(reduced[r], reduced_ref[r]) << "rank " << r;
    EXPECT_EQ(gathered[r], gathered_ref[r]) << "rank " << r;
  }
}

}  // namespace
}  // namespace qlm
