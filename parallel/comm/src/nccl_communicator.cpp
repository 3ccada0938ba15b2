// The NCCL backend: collectives on CUDA tensors, one communicator per group, its unique id
// broadcast over the bootstrap group (MPI). Built only when CMake finds CUDA and NCCL.
// Each call is enqueued on this communicator's stream, after the work already on the default
// stream (where LibTorch produced the tensors), and waited for with a deadline
// (cudaStreamQuery + ncclCommGetAsyncError); past it the communicator is aborted and the
// call throws, so a dead peer ends the job instead of hanging it. isend / iallreduce return at
// once with an event recorded after the operation (PendingOperation: test polls the event,
// wait applies the same deadline).
#include <chrono>
#include <cstring>
#include <thread>

#include <cuda_runtime.h>
#include <nccl.h>
#include <torch/torch.h>

#include "collective_timeout.hpp"
#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {
namespace {

ncclDataType_t nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat: return ncclFloat32;
    case torch::kDouble: return ncclFloat64;
    case torch::kHalf: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kInt: return ncclInt32;
    case torch::kLong: return ncclInt64;
    case torch::kByte: return ncclUint8;
    default: break;
  }
  throw Error(std::string("nccl: tensor type ") + c10::toString(t.scalar_type()) + " not supported");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAverage: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device)
      : bootstrap_(bootstrap), device_(device), rank_(bootstrap.rank()), size_(bootstrap.size()),
        timeout_(collective_timeout_seconds()) {
    cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    torch::Tensor bytes = torch::empty({int64_t(sizeof id)}, torch::kUInt8);
    if (rank_ == 0) std::memcpy(bytes.data_ptr(), &id, sizeof id);
    bootstrap_.broadcast(bytes, 0);
    std::memcpy(&id, bytes.data_ptr(), sizeof id);
    nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void broadcast(torch::Tensor& t, int root) override {
    check(t, "broadcast");
    after_default_stream();
    nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t), root, comm_, stream_), "ncclBroadcast");
    wait("broadcast");
  }
  void allreduce(torch::Tensor& t, ReduceOp op) override {
    check(t, "allreduce");
    after_default_stream();
    nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t), nccl_op(op), comm_, stream_),
         "ncclAllReduce");
    wait("allreduce");
  }
  torch::Tensor allgather(const torch::Tensor& t) override {
    check(t, "allgather");
    std::vector<int64_t> shape{size_};
    for (int64_t s : t.sizes()) shape.push_back(s);
    torch::Tensor out = torch::empty(shape, t.options());
    after_default_stream();
    nccl(ncclAllGather(t.data_ptr(), out.data_ptr(), t.numel(), nccl_type(t), comm_, stream_), "ncclAllGather");
    wait("allgather");
    return out;
  }
  torch::Tensor reduce_scatter(const torch::Tensor& t, ReduceOp op) override {
    check(t, "reduce_scatter");
    if (t.dim() == 0 || t.size(0) % size_ != 0)
      throw Error(where("reduce_scatter") + "dim 0 is not a multiple of the group size");
    torch::Tensor out = torch::empty_like(t.narrow(0, 0, t.size(0) / size_));
    after_default_stream();
    nccl(ncclReduceScatter(t.data_ptr(), out.data_ptr(), out.numel(), nccl_type(t), nccl_op(op), comm_, stream_),
         "ncclReduceScatter");
    wait("reduce_scatter");
    return out;
  }
  void send(const torch::Tensor& t, int destination, int) override {
    check(t, "send");
    after_default_stream();
    nccl(ncclSend(t.data_ptr(), t.numel(), nccl_type(t), destination, comm_, stream_), "ncclSend");
    wait("send");
  }
  void recv(torch::Tensor& t, int source, int) override {
    check(t, "recv");
    after_default_stream();
    nccl(ncclRecv(t.data_ptr(), t.numel(), nccl_type(t), source, comm_, stream_), "ncclRecv");
    wait("recv");
  }
  void sendrecv(const torch::Tensor& out, int destination, torch::Tensor& in, int source, int) override {
    // One NCCL group: the send and the receive progress together (no deadlock between neighbours).
    after_default_stream();
    nccl(ncclGroupStart(), "ncclGroupStart");
    if (destination >= 0) {
      check(out, "send");
      nccl(ncclSend(out.data_ptr(), out.numel(), nccl_type(out), destination, comm_, stream_), "ncclSend");
    }
    if (source >= 0) {
      check(in, "recv");
      nccl(ncclRecv(in.data_ptr(), in.numel(), nccl_type(in), source, comm_, stream_), "ncclRecv");
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd");
    wait("sendrecv");
  }
  std::unique_ptr<PendingOperation> isend(const torch::Tensor& t, int destination, int) override {
    check(t, "send");
    after_default_stream();
    nccl(ncclSend(t.data_ptr(), t.numel(), nccl_type(t), destination, comm_, stream_), "ncclSend");
    return std::make_unique<Pending>(*this, t, "send");
  }
  std::unique_ptr<PendingOperation> iallreduce(torch::Tensor& t, ReduceOp op) override {
    check(t, "allreduce");
    after_default_stream();
    nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t), nccl_op(op), comm_, stream_),
         "ncclAllReduce");
    return std::make_unique<Pending>(*this, t, "allreduce");
  }
  void barrier() override {
    torch::Tensor one = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA, device_));
    allreduce(one, ReduceOp::kSum);
  }
  std::unique_ptr<Communicator> split(int color, int key) override;
  // Work counters are host-side: the bootstrap group's.
  std::unique_ptr<SharedCounter> make_counter() override { return bootstrap_.make_counter(); }

 private:
  struct OwningNccl;

  std::string where(const std::string& op) const { return "rank " + std::to_string(rank_) + ": nccl " + op + ": "; }
  void check(const torch::Tensor& t, const char* op) const {
    if (!t.defined() || !t.is_cuda() || !t.is_contiguous())
      throw Error(where(op) + "needs a defined, contiguous CUDA tensor");
  }
  void nccl(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess) throw Error(where(what) + ncclGetErrorString(r));
  }
  void cuda(cudaError_t r, const char* what) const {
    if (r != cudaSuccess) throw Error(where(what) + cudaGetErrorString(r));
  }
  void wait(const char* op) { wait_until([this] { return cudaStreamQuery(stream_); }, op); }
  // Polls `query` (a stream's or an event's) until cudaSuccess; an asynchronous NCCL error or
  // the deadline aborts the communicator and throws.
  template <class Query>
  void wait_until(Query query, const std::string& op) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      const cudaError_t q = query();
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) cuda(q, op.c_str());
      ncclResult_t async = ncclSuccess;
      if (comm_) ncclCommGetAsyncError(comm_, &async);
      if (!comm_ || (async != ncclSuccess && async != ncclInProgress)) {
        if (comm_) ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(where(op) + (async != ncclSuccess ? ncclGetErrorString(async) : "communicator aborted"));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(where(op) + "timed out after " + std::to_string(int(timeout_)) + " s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // This communicator's stream waits for the work queued so far on the default stream, where
  // LibTorch computed the tensors it is about to move (the stream is non-blocking, so without
  // this an operation could read a gradient before its kernel finished).
  void after_default_stream() {
    cudaEvent_t ready;
    cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda(cudaEventRecord(ready, cudaStreamLegacy), "cudaEventRecord");
    cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);  // released once the wait has been satisfied
  }

  // An operation enqueued on the stream: an event after it says when it is done; the tensor
  // is held until then.
  class Pending final : public PendingOperation {
   public:
    Pending(NcclCommunicator& c, torch::Tensor t, std::string op) : c_(c), tensor_(std::move(t)), op_(std::move(op)) {
      c_.cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
      c_.cuda(cudaEventRecord(done_, c_.stream_), "cudaEventRecord");
    }
    ~Pending() override {
      try {
        wait();
      } catch (const std::exception&) {  // the caller is already failing
      }
    }
    bool test() override {
      if (!done_) return true;
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaErrorNotReady) return false;
      wait();  // done, or an error wait() reports
      return true;
    }
    void wait() override {
      if (!done_) return;
      cudaEvent_t e = done_;
      done_ = nullptr;
      c_.wait_until([e] { return cudaEventQuery(e); }, op_);
      cudaEventDestroy(e);
    }

   private:
    NcclCommunicator& c_;
    torch::Tensor tensor_;
    std::string op_;
    cudaEvent_t done_ = nullptr;
  };

  Communicator& bootstrap_;
  int device_;
  int rank_, size_;
  double timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A split group: owns the bootstrap sub-group its NCCL communicator was made from.
struct NcclCommunicator::OwningNccl final : Communicator {
  OwningNccl(std::unique_ptr<Communicator> bootstrap, int device)
      : bootstrap_(std::move(bootstrap)), nccl_(*bootstrap_, device) {}
  int rank() const override { return nccl_.rank(); }
  int size() const override { return nccl_.size(); }
  std::string backend() const override { return nccl_.backend(); }
  void broadcast(torch::Tensor& t, int root) override { nccl_.broadcast(t, root); }
  void allreduce(torch::Tensor& t, ReduceOp op) override { nccl_.allreduce(t, op); }
  torch::Tensor allgather(const torch::Tensor& t) override { return nccl_.allgather(t); }
  torch::Tensor reduce_scatter(const torch::Tensor& t, ReduceOp op) override { return nccl_.reduce_scatter(t, op); }
  void send(const torch::Tensor& t, int d, int tag) override { nccl_.send(t, d, tag); }
  void recv(torch::Tensor& t, int s, int tag) override { nccl_.recv(t, s, tag); }
  void sendrecv(const torch::Tensor& out, int d, torch::Tensor& in, int s, int tag) override {
    nccl_.sendrecv(out, d, in, s, tag);
  }
  void barrier() override { nccl_.barrier(); }
  std::unique_ptr<PendingOperation> isend(const torch::Tensor& t, int d, int tag) override { return nccl_.isend(t, d, tag); }
  std::unique_ptr<PendingOperation> iallreduce(torch::Tensor& t, ReduceOp op) override { return nccl_.iallreduce(t, op); }
  std::unique_ptr<Communicator> split(int color, int key) override { return nccl_.split(color, key); }
  std::unique_ptr<SharedCounter> make_counter() override { return nccl_.make_counter(); }

  std::unique_ptr<Communicator> bootstrap_;
  NcclCommunicator nccl_;
};

// The new group's bootstrap is a split of the bootstrap group; it must live as long as the
// NCCL group, so the child owns it.
std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  return std::make_unique<OwningNccl>(bootstrap_.split(color, key), device_);
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace tessera::parallel
