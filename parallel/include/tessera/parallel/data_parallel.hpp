#pragma once
// Data-parallel training: this rank is one replica of the data axis of a ProcessGrid.
// Implements core's TrainHooks (train_hooks.hpp): parameters and buffers are broadcast from
// replica 0 before the first step; each replica reads its slice of a global batch drawn
// identically everywhere; loss statistics are summed; gradients are summed over the data
// group in buckets of at most `fusion_bytes` (parameters in reverse order, the order
// backward finishes them), one allreduce per bucket. Result: P replicas × batch b give the
// parameters of one process with batch P · b, up to float rounding (tests/parallel).
// Only world rank 0 writes metrics and checkpoints.
#include <cstdint>
#include <functional>

#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/communicator.hpp"

namespace tessera::parallel {

struct DataParallelOptions {
  int64_t fusion_bytes = int64_t{25} << 20;  ///< gradient bucket bound (PyTorch DDP's default)
  bool writes_outputs = true;                ///< set on exactly one rank (world rank 0)

  DataParallelOptions& with_fusion_bytes(int64_t v) { fusion_bytes = v; return *this; }
  DataParallelOptions& with_writes_outputs(bool v) { writes_outputs = v; return *this; }
  /// Throws tessera::Error naming the bad field.
  void validate() const;
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
  void on_gradients(UNet& net) override;
  void on_step(int64_t step, double loss) override;

  /// Called after every step (e.g. telemetry's step counter).
  void set_step_callback(std::function<void(int64_t, double)> fn) { step_callback_ = std::move(fn); }
  /// Allreduce calls and bytes so far (for the bench and the tests).
  int64_t buckets_reduced() const { return buckets_; }
  int64_t bytes_reduced() const { return bytes_; }

 private:
  Communicator& data_;
  DataParallelOptions options_;
  std::function<void(int64_t, double)> step_callback_;
  int64_t buckets_ = 0, bytes_ = 0;
};

}  // namespace tessera::parallel
