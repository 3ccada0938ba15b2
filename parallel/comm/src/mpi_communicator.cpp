#include "mpi_communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <numeric>
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
      return MPI_UINT16_T;  // moved as raw bits; sums by the user operations below
    default: break;
  }
  throw Error(std::string("mpi: tensor type ") + c10::toString(t.scalar_type()) + " not supported" +
              (reducing ? " in reductions" : ""));
}

// Element-wise sums of 16-bit floats (MPI has no such type): each addition in fp32, rounded
// back to nearest even.
template <class T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(float(a[i]) + float(b[i]));
}

MPI_Op mpi_op(ReduceOp op, const torch::Tensor& t) {
  if (t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf) {
    if (op != ReduceOp::kSum && op != ReduceOp::kAverage) throw Error("mpi: 16-bit float tensors reduce by sum only");
    static const MPI_Op bf16_sum = [] {
      MPI_Op o;
      MPI_Op_create(&sum_16bit<c10::BFloat16>, /*commute=*/1, &o);
      return o;
    }();
    static const MPI_Op half_sum = [] {
      MPI_Op o;
      MPI_Op_create(&sum_16bit<c10::Half>, /*commute=*/1, &o);
      return o;
    }();
    return t.scalar_type() == torch::kBFloat16 ? bf16_sum : half_sum;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

// MPI_Win_free and MPI_Comm_free are collective. While an exception unwinds the stack, the
// other ranks are not freeing the same object, and waiting for them would keep this rank
// from reaching abort_job: then the object is left to the ending process.
bool unwinding_or_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized || std::uncaught_exceptions() > 0;
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
    if (!unwinding_or_finalized()) MPI_Win_free(&win_);
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

// Who has reached the current collective. Each rank counts the collectives it entered on
// the communicator, in one int64 of a window it exposes (one local atomic per collective).
// When a collective times out, the waiting rank reads the others' counts one-sidedly, so a
// rank that stopped answering need not take part: the ranks whose count is below this
// rank's never arrived; a rank whose count cannot be read in time is counted with them.
class ArrivalBoard {
 public:
  explicit ArrivalBoard(MPI_Comm comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    if (MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, comm, &count_, &win_) != MPI_SUCCESS) {
      win_ = MPI_WIN_NULL;  // no board: a timeout cannot name the late ranks, nothing else changes
      return;
    }
    *count_ = 0;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win_);  // one passive epoch for the board's lifetime
    MPI_Win_sync(win_);
  }
  ~ArrivalBoard() {
    if (win_ == MPI_WIN_NULL || unwinding_or_finalized()) return;
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  ArrivalBoard(const ArrivalBoard&) = delete;
  ArrivalBoard& operator=(const ArrivalBoard&) = delete;

  /// Called as this rank enters a collective.
  void arrive() {
    ++entered_;
    if (win_ == MPI_WIN_NULL) return;
    MPI_Accumulate(&entered_, 1, MPI_INT64_T, rank_, 0, 1, MPI_INT64_T, MPI_REPLACE, win_);
    MPI_Win_flush(rank_, win_);
  }

  /// Ranks (of the communicator) that have not entered the collective this rank is in.
  /// Empty when the board could not be made.
  std::vector<int> missing(double answer_seconds) {
    if (win_ == MPI_WIN_NULL) return {};
    std::vector<int64_t> counts(static_cast<size_t>(size_), -1);
    std::vector<MPI_Request> reads(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    for (int p = 0; p < size_; ++p)
      if (p != rank_)
        MPI_Rget_accumulate(nullptr, 0, MPI_INT64_T, &counts[size_t(p)], 1, MPI_INT64_T, p, 0, 1, MPI_INT64_T,
                            MPI_NO_OP, win_, &reads[size_t(p)]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(answer_seconds);
    std::vector<char> answered(static_cast<size_t>(size_), 0);
    for (bool all = false; !all && std::chrono::steady_clock::now() < deadline;) {
      all = true;
      for (int p = 0; p < size_; ++p) {
        int done = p == rank_;
        if (!done && !answered[size_t(p)]) MPI_Test(&reads[size_t(p)], &done, MPI_STATUS_IGNORE);
        answered[size_t(p)] = answered[size_t(p)] || done;
        all = all && answered[size_t(p)];
      }
      if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> out;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && (!answered[size_t(p)] || counts[size_t(p)] < entered_)) out.push_back(p);
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
  int64_t entered_ = 0;
  int64_t* count_ = nullptr;
  MPI_Win win_ = MPI_WIN_NULL;
};

class MpiCommunicator final : public Communicator {
  // A posted MPI request and the tensor it reads or writes (kept alive until it completes).
  class MpiPending final : public PendingOperation {
   public:
    MpiPending(const MpiCommunicator& comm, torch::Tensor t, std::string op, int peer)
        : comm_(comm), tensor_(std::move(t)), op_(std::move(op)), peer_(peer) {}
    ~MpiPending() override {
      if (request == MPI_REQUEST_NULL || unwinding_or_finalized()) return;
      try {
        wait();
      } catch (const std::exception&) {  // the caller is already failing; the job aborts
      }
    }
    bool test() override {
      if (request == MPI_REQUEST_NULL) return true;
      int done = 0;
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) comm_.wait(request, op_, peer_);  // names the failure
      return done != 0;
    }
    void wait() override {
      if (request != MPI_REQUEST_NULL) comm_.wait(request, op_, peer_);
      request = MPI_REQUEST_NULL;
    }
    MPI_Request request = MPI_REQUEST_NULL;

   private:
    const MpiCommunicator& comm_;
    torch::Tensor tensor_;
    std::string op_;
    int peer_;
  };

 public:
  MpiCommunicator(MPI_Comm comm, bool owns)
      : comm_(comm), owns_(owns), timeout_(collective_timeout_seconds()), board_(std::make_unique<ArrivalBoard>(comm)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    // Errors name world ranks, whatever group the operation ran in.
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> mine(static_cast<size_t>(size_));
    std::iota(mine.begin(), mine.end(), 0);
    world_ranks_.resize(mine.size());
    MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  }
  ~MpiCommunicator() override {
    board_.reset();
    if (owns_ && !unwinding_or_finalized()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void broadcast(torch::Tensor& t, int root) override {
    check(t, "broadcast");
    MPI_Request r;
    board_->arrive();
    MPI_Ibcast(t.data_ptr(), count(t), mpi_type(t, false), root, comm_, &r);
    wait(r, "broadcast");
  }

  void allreduce(torch::Tensor& t, ReduceOp op) override {
    check(t, "allreduce");
    MPI_Request r;
    board_->arrive();
    MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count(t), mpi_type(t, true), mpi_op(op, t), comm_, &r);
    wait(r, "allreduce");
    finish_average(t, op);
  }

  torch::Tensor allgather(const torch::Tensor& t) override {
    check(t, "allgather");
    std::vector<int64_t> shape{size_};
    for (int64_t s : t.sizes()) shape.push_back(s);
    torch::Tensor out = torch::empty(shape, t.options());
    MPI_Request r;
    board_->arrive();
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
    board_->arrive();
    MPI_Ireduce_scatter_block(t.data_ptr(), out.data_ptr(), count(out), mpi_type(t, true), mpi_op(op, t), comm_, &r);
    wait(r, "reduce_scatter");
    finish_average(out, op);
    return out;
  }

  void send(const torch::Tensor& t, int destination, int tag) override {
    check(t, "send");
    MPI_Request r;
    MPI_Isend(t.data_ptr(), count(t), mpi_type(t, false), destination, tag, comm_, &r);
    wait(r, "send", destination);
  }

  std::unique_ptr<PendingOperation> isend(const torch::Tensor& t, int destination, int tag) override {
    check(t, "send");
    auto op = std::make_unique<MpiPending>(*this, t, "send", destination);
    MPI_Isend(t.data_ptr(), count(t), mpi_type(t, false), destination, tag, comm_, &op->request);
    return op;
  }

  std::unique_ptr<PendingOperation> iallreduce(torch::Tensor& t, ReduceOp op) override {
    check(t, "allreduce");
    if (op == ReduceOp::kAverage) {  // the division needs the sums: blocking
      allreduce(t, op);
      return Communicator::iallreduce(t, ReduceOp::kSum);
    }
    board_->arrive();
    auto pending = std::make_unique<MpiPending>(*this, t, "allreduce", -1);
    MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count(t), mpi_type(t, true), mpi_op(op, t), comm_, &pending->request);
    return pending;
  }

  void recv(torch::Tensor& t, int source, int tag) override {
    check(t, "recv");
    MPI_Request r;
    MPI_Irecv(t.data_ptr(), count(t), mpi_type(t, false), source, tag, comm_, &r);
    wait(r, "recv", source);
  }

  void sendrecv(const torch::Tensor& out, int destination, torch::Tensor& in, int source, int tag) override {
    MPI_Request sent = MPI_REQUEST_NULL, received = MPI_REQUEST_NULL;
    if (source >= 0) {
      check(in, "recv");
      MPI_Irecv(in.data_ptr(), count(in), mpi_type(in, false), source, tag, comm_, &received);
    }
    if (destination >= 0) {
      check(out, "send");
      MPI_Isend(out.data_ptr(), count(out), mpi_type(out, false), destination, tag, comm_, &sent);
    }
    if (source >= 0) wait(received, "recv", source);
    if (destination >= 0) wait(sent, "send", destination);
  }
  void barrier() override {
    MPI_Request r;
    board_->arrive();
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

  // Polls until the request completes or the deadline passes: a rank that died, hangs or
  // never joins turns into an error on the others instead of a hang. `peer`: the other
  // side of a send or recv; -1 for a collective.
  void wait(MPI_Request& r, const std::string& op, int peer = -1) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    int done = 0;
    for (int spin = 0;; ++spin) {
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        throw Error(where(peer < 0 ? op : op + " with rank " + std::to_string(world_ranks_[size_t(peer)])) + "failed");
      if (done) return;
      if (spin > 1000) {
        if (std::chrono::steady_clock::now() > deadline) throw Error(timeout_message(op, peer));
        std::this_thread::sleep_for(std::chrono::microseconds(spin > 100000 ? 1000 : 20));
      }
    }
  }

  // "rank 0: mpi allreduce timed out after 20 s waiting for rank 1 (...)": the ranks named
  // are the peer of a send/recv, or those the arrival board shows never entered the collective.
  std::string timeout_message(const std::string& op, int peer) const {
    constexpr double kAnswerSeconds = 5;
    const std::vector<int> late = peer >= 0 ? std::vector<int>{peer} : board_->missing(kAnswerSeconds);
    std::string who = late.empty() ? "another rank" : late.size() == 1 ? "rank " : "ranks ";
    constexpr size_t kNamed = 8;
    for (size_t i = 0; i < late.size() && i < kNamed; ++i)
      who += (i ? ", " : "") + std::to_string(world_ranks_[size_t(late[i])]);
    if (late.size() > kNamed) who += " and " + std::to_string(late.size() - kNamed) + " more";
    return "rank " + std::to_string(world_rank_) + ": mpi " + op + " timed out after " + std::to_string(int(timeout_)) +
           " s waiting for " + who + " (stopped answering, failed or never called it; TESSERA_COLLECTIVE_TIMEOUT)";
  }

  MPI_Comm comm_;
  bool owns_;
  double timeout_;
  std::unique_ptr<ArrivalBoard> board_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
  std::vector<int> world_ranks_;  // world rank of each rank of this group
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, bool owns) {
  return std::make_unique<MpiCommunicator>(comm, owns);
}

}  // namespace tessera::parallel
