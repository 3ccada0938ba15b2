#pragma once
// Pipeline-parallel training through the one-process trainer (core/trainer.hpp): this rank
// is one stage of a pipeline (ProcessGrid::pipeline()) and one replica of the data axis
// (ProcessGrid::data()). Implements core's TrainHooks (train_hooks.hpp):
//   - every rank keeps the whole model and the optimiser (replicated, so checkpoints,
//     validation and resume are those of one process); the activations, the memory that
//     grows with the tile, are split across the stages;
//   - forward_backward() runs the replica's batch through a PipelineTrainer (pipeline.hpp)
//     cut by the memory-aware balance (planner.hpp) for the tile side at hand (rebuilt when a
//     curriculum changes it), with the model's current weights, and adds the stage's
//     gradients into the model's;
//   - on_gradients() sums the gradients over the pipeline group (each stage contributed its
//     own parameters' share; the stage gradients are already summed over replicas).
// With a spatial group (pipeline × spatial, ProcessGrid::spatial()), every stage is split over
// the blocks of each tile: the ranks of the group scatter the tiles and run their stage on
// their blocks (PipelineTrainer with a SpatialDecomposition, halo exchanges and norm
// statistics inside every forward, recomputation and backward); `same` padding.
// Result: the optimiser steps of one process with the global batch (tests/parallel).
// Group norm or no norm; losses ce and focal (PipelineOptions::validate names the field).
#include <cstdint>
#include <functional>
#include <memory>

#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {

class PipelineTrainer;
struct PipelineStepStats;

struct PipelineHookOptions {
  int micro_batches = 0;  ///< M per replica batch; 0: the batch size (one tile per micro-batch)
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;
  bool writes_outputs = true;  ///< set on exactly one rank (world rank 0)
  bool keep_output = false;    ///< the last stage keeps the last step's logits (last_output; tests)

  PipelineHookOptions& with_micro_batches(int m) { micro_batches = m; return *this; }
  PipelineHookOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  PipelineHookOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
  PipelineHookOptions& with_writes_outputs(bool v) { writes_outputs = v; return *this; }
  PipelineHookOptions& with_keep_output(bool v) { keep_output = v; return *this; }
  /// Throws tessera::Error naming the bad field (parallel.micro_batches).
  void validate() const;
};

class PipelineTrainHooks final : public TrainHooks {
 public:
  /// `pipeline` and `data` are ProcessGrid::pipeline() / data(); not owned, must outlive the hooks.
  PipelineTrainHooks(Communicator& pipeline, Communicator& data, PipelineHookOptions options = {});
  /// Pipeline × spatial: `spatial` is ProcessGrid::spatial() (not owned, must outlive the
  /// hooks), `mesh` its blocks of every tile (mesh.size() == spatial.size()).
  PipelineTrainHooks(Communicator& pipeline, Communicator& data, Communicator& spatial, SpatialMesh mesh,
                     PipelineHookOptions options = {});
  ~PipelineTrainHooks() override;

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
  /// The balance of the current pipeline (empty before the first step).
  const std::vector<int>& balance() const { return balance_; }
  /// This rank's stage and what its last train_step did (nullptr before the first step).
  int stage_index() const { return pipeline_.rank(); }
  const PipelineStepStats* last_step() const;
  /// With keep_output, on the last stage: the last step's logits of this replica's batch
  /// (this rank's block with a spatial group); undefined otherwise.
  torch::Tensor last_output() const;
  /// The spatial blocks of every tile (pipeline × spatial), or nullptr.
  const SpatialDecomposition* decomposition() const { return decomposition_.get(); }

 private:
  Communicator& pipeline_;
  Communicator& data_;
  PipelineHookOptions options_;
  std::function<void(int64_t, double)> step_callback_;
  std::unique_ptr<SpatialDecomposition> decomposition_;
  std::unique_ptr<PipelineTrainer> trainer_;
  int64_t side_ = 0;
  int micro_ = 0;
  std::vector<int> balance_;
};

}  // namespace tessera::parallel
