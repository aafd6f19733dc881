// In-process tensor parallelism: N ranks as N threads sharing one LocalCommGroup. Collectives
// publish a pointer per rank, meet at a barrier, and every rank computes the same result in rank
// order, so results are deterministic and bit-identical on all ranks.
#include <barrier>
#include <cstring>
#include <exception>
#include <thread>

#include "parallel/communicator.h"

namespace qlm {

namespace {

struct GroupState {
  explicit GroupState(int n) : size(n), sync(n), inputs(static_cast<size_t>(n), nullptr) {}
  int size;
  std::barrier<> sync;
  std::vector<const Tensor*> inputs;  // rank r's tensor for the collective in progress
};

class LocalComm final : public Communicator {
 public:
  LocalComm(int rank, std::shared_ptr<GroupState> shared) : rank_(rank), shared_(std::move(shared)) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }

  void all_reduce_sum(Tensor& t) override {
    publish(t);
    // Every rank checks every input against rank 0's, so all ranks agree on throwing.
    check_inputs("all_reduce_sum", /*f32_only=*/true);
    const auto n = static_cast<size_t>(t.numel());
    std::vector<float> sum(n, 0.0f);
    for (const Tensor* in : shared_->inputs) {
      const float* p = in->data<float>();
      for (size_t i = 0; i < n; ++i) sum[i] += p[i];
    }
    shared_->sync.arrive_and_wait();  // every rank has read every input
    if (n) std::memcpy(t.data<float>(), sum.data(), n * sizeof(float));
  }

  Tensor all_gather(const Tensor& t, int dim) override {
    publish(t);
    check_inputs("all_gather", /*f32_only=*/false);
    const Shape& shape = t.shape();
    if (dim < 0 || dim >= t.dim()) {
      shared_->sync.arrive_and_wait();
      fail("comm.shape", {}, "", "all_gather: dimension {} out of range for {}", dim, t.str());
    }
    Shape out_shape = shape;
    out_shape[static_cast<size_t>(dim)] *= shared_->size;
    Tensor out = Tensor::empty(out_shape, t.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= shape[static_cast<size_t>(d)];
    for (int64_t d = dim; d < t.dim(); ++d) inner *= shape[static_cast<size_t>(d)];
    const size_t chunk = static_cast<size_t>(inner) * dtype_size(t.dtype());
    std::byte* dst = out.raw_data();
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor* in : shared_->inputs) {
        if (chunk) std::memcpy(dst, in->raw_data() + static_cast<size_t>(o) * chunk, chunk);
        dst += chunk;
      }
    shared_->sync.arrive_and_wait();
    return out;
  }

  void broadcast(Tensor& t, int root) override {
    publish(t);
    check_inputs("broadcast", /*f32_only=*/false);
    if (root < 0 || root >= shared_->size) {
      shared_->sync.arrive_and_wait();
      fail("comm.rank", {}, "", "broadcast: root {} out of range for a group of {}", root, shared_->size);
    }
    const Tensor& src = *shared_->inputs[static_cast<size_t>(root)];
    if (rank_ != root && t.nbytes()) std::memcpy(t.raw_data(), src.raw_data(), t.nbytes());
    shared_->sync.arrive_and_wait();  // the root's tensor is read by everyone before it may change
  }

  void barrier() override { shared_->sync.arrive_and_wait(); }

 private:
  void publish(const Tensor& t) {
    shared_->inputs[static_cast<size_t>(rank_)] = &t;
    shared_->sync.arrive_and_wait();
  }

  void check_inputs(const char* op, bool f32_only) {
    const Tensor& first = *shared_->inputs[0];
    for (int r = 0; r < shared_->size; ++r) {
      const Tensor& in = *shared_->inputs[static_cast<size_t>(r)];
      const char* problem = nullptr;
      if (!in.is_contiguous()) problem = "is not contiguous";
      else if (f32_only && in.dtype() != DType::F32) problem = "is not F32";
      else if (in.shape() != first.shape() || in.dtype() != first.dtype()) problem = "differs from rank 0's";
      if (problem) {
        // The message is built before the barrier: after it, other ranks unwind and free their inputs.
        Error error("comm.shape", fmt::format("{}: rank {}'s tensor {} {} (rank 0: {})", op, r, in.str(), problem,
                                              first.str()),
                    {}, "every rank must pass a contiguous tensor of the same shape and dtype");
        shared_->sync.arrive_and_wait();
        throw error;
      }
    }
  }

  int rank_;
  std::shared_ptr<GroupState> shared_;
};

}  // namespace

struct LocalCommGroup::Shared : GroupState {
  using GroupState::GroupState;
};

LocalCommGroup::LocalCommGroup(int size) {
  if (size < 1) fail("comm.size", {}, "", "a communicator group needs at least one rank, got {}", size);
  shared_ = std::make_shared<Shared>(size);
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<LocalComm>(r, shared_));
}

LocalCommGroup::~LocalCommGroup() = default;

int LocalCommGroup::size() const { return shared_->size; }

Communicator& LocalCommGroup::rank(int r) {
  if (r < 0 || r >= size()) fail("comm.rank", {}, "", "rank {} out of range for a group of {}", r, size());
  return *ranks_[static_cast<size_t>(r)];
}

TpContext LocalCommGroup::context(int r) { return TpContext{r, size(), &rank(r)}; }

void run_on_ranks(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace qlm
