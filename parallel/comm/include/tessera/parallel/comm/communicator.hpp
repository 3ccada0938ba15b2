#pragma once
// One interface for the collectives the parallel modes need, over a fixed group of ranks.
// Backends: MPI (CPU tensors; built unless TESSERA_WITH_MPI is OFF), NCCL (CUDA tensors;
// built when CUDA and NCCL are found), and a one-rank group for runs without a launcher.
// No backend type (MPI_Comm, ncclComm_t) appears here.
//
// Tensors: contiguous, on the backend's device (CPU for MPI), any layout; operations are
// in place unless they return a tensor. Reductions support float, double, int32 and int64
// (kAverage: floating types only). Every call is collective over the group (send/recv are
// point to point) and must be made in the same order on every rank. Every blocking call has
// a deadline (TESSERA_COLLECTIVE_TIMEOUT seconds, default 300): past it the call throws
// tessera::Error naming the rank, the operation and (MPI backend) the ranks it waited for,
// and the caller aborts the job.
// Not thread safe: one thread per communicator.
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tessera/core/precision.hpp"

namespace tessera::parallel {

enum class ReduceOp { kSum, kAverage, kMax, kMin };

/// A counter every rank of a group can fetch-and-increment without the others taking part
/// (MPI: one-sided MPI_Fetch_and_op on a window at rank 0). Hands out work dynamically:
/// a rank that finishes early takes more. Starts at 0. Call from one thread per rank.
class SharedCounter {
 public:
  virtual ~SharedCounter() = default;
  /// Returns the value before adding `n`.
  virtual int64_t fetch_add(int64_t n = 1) = 0;
};

/// A posted non-blocking operation (Communicator::isend / iallreduce). It holds a reference
/// to its tensor, which must not be written (isend) or read (iallreduce) until wait() has
/// returned. test() lets the backend progress and reports completion without blocking;
/// wait() blocks under the same deadline as the blocking calls and throws the same errors.
/// Destroying an unfinished operation waits for it (errors then are dropped: the caller is
/// already failing).
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "nccl" or "self".
  virtual std::string backend() const = 0;

  /// Every rank's `t` becomes root's `t` (same shape and dtype on every rank).
  virtual void broadcast(torch::Tensor& t, int root) = 0;
  /// Every rank's `t` becomes the element-wise reduction over ranks.
  virtual void allreduce(torch::Tensor& t, ReduceOp op) = 0;
  /// Returns (size(), t.shape...) with rank r's `t` at index r; same shape on every rank.
  virtual torch::Tensor allgather(const torch::Tensor& t) = 0;
  /// `t` has size() × n elements along dim 0; returns this rank's n-slice of the reduction.
  virtual torch::Tensor reduce_scatter(const torch::Tensor& t, ReduceOp op) = 0;
  virtual void send(const torch::Tensor& t, int destination, int tag = 0) = 0;
  /// Receives into `t`, which has the sender's shape and dtype.
  virtual void recv(torch::Tensor& t, int source, int tag = 0) = 0;
  /// Sends `out` to `destination` and receives into `in` from `source` at the same time:
  /// both are posted before either is waited for, so neighbours that all send and receive at
  /// once (a halo exchange along a line) cannot deadlock. -1 skips that side.
  virtual void sendrecv(const torch::Tensor& out, int destination, torch::Tensor& in, int source, int tag = 0) = 0;
  virtual void barrier() = 0;
  /// Non-blocking send: returns at once, the transfer proceeds while the caller computes.
  /// Default (backends without one): the blocking send, returned complete.
  virtual std::unique_ptr<PendingOperation> isend(const torch::Tensor& t, int destination, int tag = 0);
  /// Non-blocking allreduce in place, collective like allreduce (same order on every rank).
  /// Default: the blocking allreduce, returned complete.
  virtual std::unique_ptr<PendingOperation> iallreduce(torch::Tensor& t, ReduceOp op);
  /// Collective: ranks with the same `color` form a new group, ordered by `key`.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  /// Collective: a new SharedCounter over this group (free it collectively, on every rank).
  virtual std::unique_ptr<SharedCounter> make_counter() = 0;
};

/// Element-wise sum over `group` of several tensors of one dtype at once: packed into one
/// flat buffer, one allreduce, unpacked in place (fewer, larger messages than one each).
void allreduce_sum_packed(Communicator& group, const std::vector<torch::Tensor>& tensors);

/// allreduce_sum_packed, non-blocking: the constructor packs the tensors into one flat buffer
/// (the same layout, hence bit for bit the same sums) and posts its iallreduce; finish()
/// waits and writes the sums back into the tensors. Not copyable.
///
/// `wire` is what travels. kFp32: the fp32 values, exact. kBf16 / kFp16: half the bytes, with
/// error feedback: the packed values plus `residual` (a flat fp32 tensor the caller keeps
/// between calls; undefined or of another size = zeros; nullptr = no feedback) are rounded to
/// nearest even, the rounding error becomes the new residual, and the 16-bit values are summed
/// (each addition in fp32, rounded back). What one call loses the next one sends, so over many
/// steps the applied sum tracks the true one within one rounding; a single sum is not exact.
class PackedAllreduce {
 public:
  PackedAllreduce(Communicator& group, std::vector<torch::Tensor> tensors, Precision wire = Precision::kFp32,
                  torch::Tensor* residual = nullptr);
  bool test();    ///< progresses; true once the sums have arrived (finish() then does not block)
  void finish();  ///< waits, then unpacks; idempotent
 private:
  std::vector<torch::Tensor> tensors_;
  torch::Tensor packed_;
  std::unique_ptr<PendingOperation> pending_;
  bool finished_ = false;
};

/// A group of one rank: every collective is the identity (point to point throws).
std::unique_ptr<Communicator> make_self_communicator();

/// NCCL over the ranks of `bootstrap` (any backend, normally MPI), on CUDA device `device`;
/// the NCCL unique id travels by bootstrap.broadcast. Throws tessera::Error when this build
/// has no NCCL (see compiled_backends()).
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

/// The communication backends compiled in, e.g. "mpi nccl cuda".
std::string compiled_backends();

}  // namespace tessera::parallel
