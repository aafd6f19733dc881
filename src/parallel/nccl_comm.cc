#include "parallel/nccl_comm.h"

#include <cstdlib>

#include "core/error.h"

#if defined(QLM_WITH_CUDA) && defined(QLM_WITH_NCCL)
#include <nccl.h>

#include <cstring>

#include "cuda/context.h"
#include "cuda/cuda_check.h"
#endif

namespace qlm {

#if defined(QLM_WITH_CUDA) && defined(QLM_WITH_NCCL)
namespace {

#define QLM_NCCL_CHECK(call)                                                                              \
  do {                                                                                                    \
    ncclResult_t qlm_nccl_status = (call);                                                                \
    if (qlm_nccl_status != ncclSuccess)                                                                   \
      fail("comm.nccl", {}, "check that every rank runs, that the GPUs are visible, and NCCL_DEBUG=WARN output", \
           "{} failed: {}", #call, ncclGetErrorString(qlm_nccl_status));                                  \
  } while (0)

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default:
      fail("comm.dtype", {}, "reduce F32, F16 or BF16 tensors", "all_reduce_sum of {} tensors is not supported",
           dtype_name(d));
  }
}

void keep_multicast_off() {
  // NVLink multicast (NVLS) can take shared GPU hosts out of service; the user may still choose.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
}

class NcclComm final : public Communicator {
 public:
  NcclComm(const NcclId& id, int rank, int size, int device) : rank_(rank), size_(size), device_(device) {
    keep_multicast_off();
    cuda::set_device(device);
    ncclUniqueId uid;
    static_assert(sizeof(uid.internal) == sizeof(NcclId));
    std::memcpy(uid.internal, id.data(), id.size());
    QLM_NCCL_CHECK(ncclCommInitRank(&comm_, size, uid, rank));
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(Tensor& t) override {
    require_device(t, "all_reduce_sum");
    cuda::Context& ctx = cuda::context(device_);
    QLM_NCCL_CHECK(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                 ncclSum, comm_, ctx.stream));
  }

  // Gathers into [size, ...] (rank-major), then, for dim > 0, copies each rank's block into its
  // columns of the result with one strided copy per rank.
  Tensor all_gather(const Tensor& t, int dim) override {
    require_device(t, "all_gather");
    if (dim < 0 || dim >= t.dim()) fail("comm.shape", {}, "", "all_gather: dimension {} out of range for {}", dim, t.str());
    cuda::Context& ctx = cuda::context(device_);
    const Device device = t.device();
    const size_t elem = dtype_size(t.dtype());
    Shape stacked_shape = t.shape();
    stacked_shape.insert(stacked_shape.begin(), size_);
    Tensor stacked = Tensor::empty(stacked_shape, t.dtype(), device);
    QLM_NCCL_CHECK(ncclAllGather(t.raw_data(), stacked.raw_data(), t.nbytes(), ncclChar, comm_, ctx.stream));
    Shape out_shape = t.shape();
    out_shape[static_cast<size_t>(dim)] *= size_;
    if (dim == 0) return stacked.view(out_shape);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
    for (int64_t d = dim; d < t.dim(); ++d) inner *= t.size(d);
    Tensor out = Tensor::empty(out_shape, t.dtype(), device);
    const size_t block = static_cast<size_t>(inner) * elem;  // one rank's row segment
    for (int r = 0; r < size_; ++r)
      QLM_CUDA_CHECK(cudaMemcpy2DAsync(out.raw_data() + static_cast<size_t>(r) * block, block * size_,
                                       stacked.raw_data() + static_cast<size_t>(r) * outer * block, block, block,
                                       static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, ctx.stream));
    return out;
  }

  void broadcast(Tensor& t, int root) override {
    require_device(t, "broadcast");
    if (root < 0 || root >= size_)
      fail("comm.rank", {}, "", "broadcast: root {} out of range for a group of {}", root, size_);
    cuda::Context& ctx = cuda::context(device_);
    QLM_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclChar, root, comm_, ctx.stream));
  }

  void barrier() override {
    cuda::Context& ctx = cuda::context(device_);
    Tensor one = Tensor::zeros({1}, DType::F32, Device::cuda(device_));
    QLM_NCCL_CHECK(ncclAllReduce(one.raw_data(), one.raw_data(), 1, ncclFloat32, ncclSum, comm_, ctx.stream));
    QLM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }

 private:
  void require_device(const Tensor& t, const char* what) const {
    if (t.on_host() || t.device().index != device_ || !t.is_contiguous())
      fail("comm.device", {}, "pass contiguous tensors on the rank's GPU", "{}: {} on {} but this rank drives cuda:{}",
           what, t.str(), t.device().str(), device_);
  }
  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }

NcclId make_nccl_id() {
  keep_multicast_off();
  ncclUniqueId uid;
  QLM_NCCL_CHECK(ncclGetUniqueId(&uid));
  NcclId id;
  std::memcpy(id.data(), uid.internal, id.size());
  return id;
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclId& id, int rank, int size, int device) {
  if (rank < 0 || rank >= size)
    fail("comm.rank", {}, "", "rank {} is outside the group of {}", rank, size);
  return std::make_unique<NcclComm>(id, rank, size, device);
}

#else

namespace {
[[noreturn]] void no_nccl() {
  fail("comm.unavailable", {}, "rebuild with the CUDA toolkit and NCCL installed (QLM_CUDA=AUTO or ON)",
       "this qlm was built without NCCL, so multi-GPU tensor parallelism is unavailable");
}
}  // namespace

bool nccl_available() { return false; }
NcclId make_nccl_id() { no_nccl(); }
std::unique_ptr<Communicator> make_nccl_communicator(const NcclId&, int, int, int) { no_nccl(); }

#endif

}  // namespace qlm
