#pragma once
// Spatial-parallel training through the one-process trainer (core/trainer.hpp): the ranks of
// a spatial group (ProcessGrid::spatial()) share every tile of their replica, each holding
// one block (spatial.hpp); replicas (ProcessGrid::data()) split the global batch as in data
// parallelism. Implements core's TrainHooks (train_hooks.hpp):
//   - every rank keeps the whole model and optimiser (replicated: checkpoints, validation and
//     resume are those of one process); the activations, which grow with the tile, are split;
//   - forward_backward() runs the U-Net on this rank's block under a DecompositionScope
//     (halo exchanges, whole-image norm statistics), sums the loss statistics over the blocks
//     and replicas, and backpropagates this rank's share of the global-batch loss;
//   - on_gradients() sums the weight gradients over the spatial × data ranks.
// Result: the optimiser steps of one process with the global batch (tests/parallel,
// tests/parallel/spatial_train.sh). Needs `same` padding (a `valid` U-Net is refused with a
// message naming --padding same); tile sides a multiple of 2^(levels−1) per block.
#include <functional>
#include <memory>

#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/modes/spatial.hpp"

namespace tessera::parallel {

struct SpatialHookOptions {
  bool sync_batch_norm = false;  ///< batch norm statistics over every replica's blocks too
  bool writes_outputs = true;    ///< set on exactly one rank (world rank 0)
  SpatialHookOptions& with_sync_batch_norm(bool v) { sync_batch_norm = v; return *this; }
  SpatialHookOptions& with_writes_outputs(bool v) { writes_outputs = v; return *this; }
};

class SpatialTrainHooks final : public TrainHooks {
 public:
  /// `spatial` and `data` are ProcessGrid::spatial() / data(); not owned, must outlive the hooks.
  SpatialTrainHooks(Communicator& spatial, Communicator& data, SpatialMesh mesh, SpatialHookOptions options = {});

  int replica() const override { return data_.rank(); }
  int replicas() const override { return data_.size(); }
  bool writes_outputs() const override { return options_.writes_outputs; }
  void on_start(UNet& net) override;
  void sum(torch::Tensor& t) override;
  std::optional<HookedStep> forward_backward(UNet& net, const torch::Tensor& input, const torch::Tensor& target,
                                             const LossOptions& loss, double scale) override;
  void on_gradients(UNet& net) override;
  void on_step(int64_t step, double loss) override;
  void set_step_callback(std::function<void(int64_t, double)> fn) { step_callback_ = std::move(fn); }

  const SpatialDecomposition& decomposition() const { return decomposition_; }

 private:
  Communicator& spatial_;
  Communicator& data_;
  SpatialHookOptions options_;
  SpatialDecomposition decomposition_;
  std::function<void(int64_t, double)> step_callback_;
};

}  // namespace tessera::parallel
