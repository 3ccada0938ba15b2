#include "mpi_communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

MPI_Datatype mpi_type(const torch::Tensor& t, bool reducing) {
  switch (t.scalar_type()) {
    case torch::kFloat: return MPI_FLOAT;
    case torch::kDouble: return MPI_DOUBLE;
    case torch::kInt: return MPI_INT32_T;
    case torch::kLong: return MPI_INT64_T;
    case torch::kByte:
      if (!reducing) return MPI_UINT8_T;
      break;
    case torch::kHalf:
    case torch::kBFloat16:
      if (!reducing) return MPI_UINT16_T;  // moved as raw bits; reductions need a float type
      break;
    default: break;
  }
  throw Error(std::string("mpi: tensor type ") + c10::toString(t.scalar_type()) + " not supported" +
              (reducing ? " in reductions" : ""));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

// One int64 in a window exposed by rank 0; the others fetch-and-add it under a shared lock.
class MpiCounter final : public SharedCounter {
 public:
  explicit MpiCounter(MPI_Comm comm) : comm_(comm) {
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    const MPI_Aint bytes = rank == 0 ? sizeof(int64_t) : 0;
    if (MPI_Win_allocate(bytes, sizeof(int64_t), MPI_INFO_NULL, comm_, &base_, &win_) != MPI_SUCCESS)
      throw Error("mpi: MPI_Win_allocate failed for a shared counter");
    if (rank == 0) {
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win_);
      *base_ = 0;
      MPI_Win_unlock(0, win_);
    }
    MPI_Barrier(comm_);
  }
  ~MpiCounter() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Win_free(&win_);
  }
  int64_t fetch_add(int64_t n) override {
    int64_t before = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win_);
    MPI_Fetch_and_op(&n, &before, MPI_INT64_T, 0, 0, MPI_SUM, win_);
    MPI_Win_unlock(0, win_);
    return before;
  }

 private:
  MPI_Comm comm_;
  int64_t* base_ = nullptr;
  MPI_Win win_ = MPI_WIN_NULL;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owns) : comm_(comm), owns_(owns), timeout_(collective_timeout_seconds()) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void broadcast(torch::Tensor& t, int root) override {
    check(t, "broadcast");
    MPI_Request r;
    MPI_Ibcast(t.data_ptr(), count(t), mpi_type(t, false), root, comm_, &r);
    wait(r, "broadcast");
  }

  void allreduce(torch::Tensor& t, ReduceOp op) override {
    check(t, "allreduce");
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count(t), mpi_type(t, true), mpi_op(op), comm_, &r);
    wait(r, "allreduce");
    finish_average(t, op);
  }

  torch::Tensor allgather(const torch::Tensor& t) override {
    check(t, "allgather");
    std::vector<int64_t> shape{size_};
    for (int64_t s : t.sizes()) shape.push_back(s);
    torch::Tensor out = torch::empty(shape, t.options());
    MPI_Request r;
    MPI_Iallgather(t.data_ptr(), count(t), mpi_type(t, false), out.data_ptr(), count(t), mpi_type(t, false), comm_, &r);
    wait(r, "allgather");
    return out;
  }

  torch::Tensor reduce_scatter(const torch::Tensor& t, ReduceOp op) override {
    check(t, "reduce_scatter");
    if (t.dim() == 0 || t.size(0) % size_ != 0)
      throw Error(where("reduce_scatter") + "dim 0 (" + std::to_string(t.dim() ? t.size(0) : 0) +
                  ") is not a multiple of the group size " + std::to_string(size_));
    torch::Tensor out = torch::empty_like(t.narrow(0, 0, t.size(0) / size_));
    MPI_Request r;
    MPI_Ireduce_scatter_block(t.data_ptr(), out.data_ptr(), count(out), mpi_type(t, true), mpi_op(op), comm_, &r);
    wait(r, "reduce_scatter");
    finish_average(out, op);
    return out;
  }

  void send(const torch::Tensor& t, int destination, int tag) override {
    check(t, "send");
    MPI_Request r;
    MPI_Isend(t.data_ptr(), count(t), mpi_type(t, false), destination, tag, comm_, &r);
    wait(r, "send to rank " + std::to_string(destination));
  }

  void recv(torch::Tensor& t, int source, int tag) override {
    check(t, "recv");
    MPI_Request r;
    MPI_Irecv(t.data_ptr(), count(t), mpi_type(t, false), source, tag, comm_, &r);
    wait(r, "recv from rank " + std::to_string(source));
  }

  void barrier() override {
    MPI_Request r;
    MPI_Ibarrier(comm_, &r);
    wait(r, "barrier");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    if (MPI_Comm_split(comm_, color, key, &sub) != MPI_SUCCESS) throw Error(where("split") + "MPI_Comm_split failed");
    return make_mpi_communicator(sub, true);
  }

  std::unique_ptr<SharedCounter> make_counter() override { return std::make_unique<MpiCounter>(comm_); }

 private:
  std::string where(const std::string& op) const {
    return "rank " + std::to_string(world_rank_) + ": mpi " + op + ": ";
  }

  void check(const torch::Tensor& t, const char* op) const {
    if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous())
      throw Error(where(op) + "needs a defined, contiguous CPU tensor");
    if (t.numel() > std::numeric_limits<int>::max())
      throw Error(where(op) + "tensor of " + std::to_string(t.numel()) + " elements exceeds MPI's int count");
  }

  static int count(const torch::Tensor& t) { return static_cast<int>(t.numel()); }

  void finish_average(torch::Tensor& t, ReduceOp op) const {
    if (op != ReduceOp::kAverage) return;
    if (!t.is_floating_point()) throw Error(where("allreduce") + "average needs a floating-point tensor");
    t.div_(size_);
  }

  // Polls until the request completes or the deadline passes: a rank that died or never
  // joins turns into an error on the others instead of a hang.
  void wait(MPI_Request& r, const std::string& op) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    int done = 0;
    for (int spin = 0;; ++spin) {
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) throw Error(where(op) + "failed");
      if (done) return;
      if (spin > 1000) {
        if (std::chrono::steady_clock::now() > deadline)
          throw Error(where(op) + "timed out after " + std::to_string(int(timeout_)) +
                      " s (another rank failed or never called it; TESSERA_COLLECTIVE_TIMEOUT)");
        std::this_thread::sleep_for(std::chrono::microseconds(spin > 100000 ? 1000 : 20));
      }
    }
  }

  MPI_Comm comm_;
  bool owns_;
  double timeout_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
};

}  // namespace

double collective_timeout_seconds() {
  if (const char* v = std::getenv("TESSERA_COLLECTIVE_TIMEOUT"); v && *v) {
    try {
      const double s = std::stod(v);
      if (s > 0) return s;
    } catch (...) {
    }
  }
  return 300;
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, bool owns) {
  return std::make_unique<MpiCommunicator>(comm, owns);
}

}  // namespace tessera::parallel
