#pragma once
// A model's step cut into pipeline stages by the model itself: a chain of layers whose
// boundaries carry a bundle of tensors (a DSN: the shared and private codes and the skips so
// far travel together), the last layer ending in the loss. The trainer's hooks run it
// (StagedHooks::run_stages; parallel/modes/staged_pipeline.hpp schedules the micro-batches
// over the pipeline group, GPipe or 1F1B, with activation checkpointing); the model supplies
// the arithmetic. Training thread only.
// The hooks that can run it implement StagedHooks beside TrainHooks; the model finds them by
// dynamic_cast (none: one process, or no stages).
#include <vector>

#include <torch/types.h>

namespace tessera {

using TensorBundle = std::vector<torch::Tensor>;

class StagedWork {
 public:
  virtual ~StagedWork() = default;
  /// Layers of the chain, the last ending in the loss (>= 2).
  virtual int layers() const = 0;
  /// Micro-batches of this step on this process (the same on every rank of a pipeline).
  virtual int micro_batches() const = 0;
  /// Layers [first, last] (last < layers() − 1) of micro-batch `m`; `in` is what layer
  /// first − 1 gave (empty for layer 0, which takes the micro-batch's input itself).
  virtual TensorBundle forward(int m, int first, int last, TensorBundle in) = 0;
  /// The last layer on `in`: micro-batch m's share of the step's loss (with a graph, to
  /// backward). `report`: false when a checkpointed micro-batch is evaluated again just before
  /// its backward (the same value: report it once).
  virtual torch::Tensor finish(int m, TensorBundle in, bool report) = 0;
  /// What the step reports (filled by finish on the last stage); the runner hands the last
  /// stage's to every stage after the step.
  virtual torch::Tensor& report() = 0;
};

/// Pipeline stages for a model that cuts itself into a chain, implemented by hooks beside
/// TrainHooks (parallel/modes/domain_hooks.hpp).
class StagedHooks {
 public:
  virtual ~StagedHooks() = default;
  /// How many stages this process's pipeline has (1: none).
  virtual int stages() const = 0;
  /// One micro-batch step's forwards and backwards through the stages (this rank's stage):
  /// the gradients of what it ran added into their parameters' .grad, to be summed with the
  /// other stages' in the hooks' on_gradients.
  virtual void run_stages(StagedWork& work) = 0;
};

}  // namespace tessera
