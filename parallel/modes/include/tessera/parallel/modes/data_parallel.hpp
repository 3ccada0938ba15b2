#pragma once
// Data-parallel training: this rank is one replica of the data axis of a ProcessGrid.
// Implements core's TrainHooks (train_hooks.hpp): parameters and buffers are broadcast from
// replica 0 before the first step; each replica reads its slice of a global batch drawn
// identically everywhere; loss statistics are summed; gradients are summed over the data
// group in buckets of at most `fusion_bytes` (the first at most min(first_bucket_bytes,
// fusion_bytes); parameters in reverse order, the order backward finishes them), one
// allreduce per bucket. With `overlap` (the default) the
// buckets are reduced during the step's last backward: a hook after each parameter's
// gradient accumulation marks it ready, and a bucket whose parameters are all ready is
// packed and its non-blocking allreduce posted — strictly in bucket order, so every replica
// posts the same collectives in the same order; on_gradients then posts what never became
// ready (unused parameters: zeros) and waits. The buckets, their layout and so the sums are
// those of the blocking path bit for bit. Result: P replicas × batch b give the parameters
// of one process with batch P · b, up to float rounding (tests/parallel).
// Only world rank 0 writes metrics and checkpoints.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

struct DataParallelOptions {
  int64_t fusion_bytes = int64_t{25} << 20;  ///< gradient bucket bound (PyTorch DDP's default)
  /// Bound of the first bucket (the last layers' gradients, ready first): small, so that its
  /// allreduce starts early in the backward (DDP's first_bucket_bytes_cap, 1 MiB).
  int64_t first_bucket_bytes = int64_t{1} << 20;
  bool writes_outputs = true;                ///< set on exactly one rank (world rank 0)
  bool overlap = true;                       ///< reduce buckets during backward (false: all after it)
  /// Gradients on the wire: fp32 (exact: P ranks equal one process) or 16-bit with error
  /// feedback (half the bytes; no longer exact), one residual per bucket kept across steps.
  Precision compression = Precision::kFp32;
  /// With compression: carry each bucket's rounding error into the next step (error feedback,
  /// the default), so the applied gradients track the true ones over many steps. Off, every
  /// step's rounding is lost, as with PyTorch's bf16_compress_hook: kept for comparison.
  bool error_feedback = true;

  DataParallelOptions& with_fusion_bytes(int64_t v) { fusion_bytes = v; return *this; }
  DataParallelOptions& with_first_bucket_bytes(int64_t v) { first_bucket_bytes = v; return *this; }
  DataParallelOptions& with_writes_outputs(bool v) { writes_outputs = v; return *this; }
  DataParallelOptions& with_overlap(bool v) { overlap = v; return *this; }
  DataParallelOptions& with_compression(Precision w) { compression = w; return *this; }
  DataParallelOptions& with_error_feedback(bool v) { error_feedback = v; return *this; }
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// This rank's gradient communication over the steps so far: per step, the union of the
/// intervals from each bucket's post to its arrival (as seen by polling), split at the end of
/// the backward. hidden / busy is the share of communication overlapped with the backward.
struct CommunicationTimeline {
  int64_t steps = 0;
  double busy_seconds = 0;     ///< Σ over steps of the union of the buckets' intervals
  double hidden_seconds = 0;   ///< the part of it before the backward ended
  double exposed_seconds = 0;  ///< Σ over steps: backward end → every sum arrived (what the step waits)
  double hidden_share() const { return busy_seconds > 0 ? hidden_seconds / busy_seconds : 0; }
};

class DataParallelHooks final : public TrainHooks {
 public:
  /// `data` is the data-axis group (ProcessGrid::data()); not owned, must outlive the hooks.
  DataParallelHooks(Communicator& data, DataParallelOptions options = {});

  int replica() const override { return data_.rank(); }
  int replicas() const override { return data_.size(); }
  bool writes_outputs() const override { return options_.writes_outputs; }
  void on_start(UNet& net) override;
  void sum(torch::Tensor& t) override;
  void before_backward(UNet& net, bool last) override;
  void on_gradients(UNet& net) override;
  void on_step(int64_t step, double loss) override;
  std::optional<StepCommunication> last_communication() const override { return last_; }

  /// Called after every step (e.g. telemetry's step counter).
  void set_step_callback(std::function<void(int64_t, double)> fn) { step_callback_ = std::move(fn); }
  /// Allreduce calls and bytes so far (for the bench and the tests).
  int64_t buckets_reduced() const { return buckets_; }
  int64_t bytes_reduced() const { return bytes_; }
  /// Buckets posted during a backward (overlapped) so far.
  int64_t buckets_overlapped() const { return overlapped_; }
  const CommunicationTimeline& timeline() const { return timeline_; }
  Precision compression() const { return options_.compression; }

  DataParallelHooks(const DataParallelHooks&) = delete;
  DataParallelHooks& operator=(const DataParallelHooks&) = delete;
  ~DataParallelHooks() override;

 private:
  struct Overlap;  // buckets, gradient hooks and posted allreduces (data_parallel.cpp)
  void reduce_blocking(UNet& net);
  /// Bucket k's error-feedback residual with gradient compression; nullptr without.
  torch::Tensor* residual(size_t k);
  /// Posts the overlap's next bucket (in bucket order) and advances to the one after.
  void post_next(Overlap& o);

  Communicator& data_;
  DataParallelOptions options_;
  std::function<void(int64_t, double)> step_callback_;
  int64_t buckets_ = 0, bytes_ = 0, overlapped_ = 0;
  CommunicationTimeline timeline_;
  std::optional<StepCommunication> last_;  ///< the last step's (metrics.jsonl)
  std::vector<torch::Tensor> residuals_;   ///< per bucket: the compression's error feedback
  std::unique_ptr<Overlap> overlap_;
};

}  // namespace tessera::parallel
