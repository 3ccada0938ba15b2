#pragma once
// Pipeline stages of a model that cuts itself into a chain (core/staged_work.hpp: a DSN's
// encoder levels and heads), scheduled like the U-Net's stages (pipeline.hpp): layers dealt
// to K stages by a balance, stage s on rank s of the pipeline group, the step's M
// micro-batches under GPipe or 1F1B in one global order of blocks every rank shares
// (pipeline_global_order), so blocking receives never deadlock. A boundary carries a bundle
// of tensors (float32; each message a header of their shapes, then the tensors, in order, on
// one tag), forward to the next stage and the gradients of the same bundle back. With
// activation checkpointing a micro-batch's forward keeps no graph (only what it received) and
// is recomputed just before its backward (the last stage's loss too; it reports once).
// Gradients are added into the parameters' .grad of whatever this stage ran; summing them
// over the pipeline group is the caller's (the hooks' on_gradients). Collectives a model
// makes inside a block (sums over replicas, halo exchanges) happen at the same block on every
// rank of the group, since every rank of a stage walks the same order.
#include <vector>

#include "tessera/core/memory_model.hpp"
#include "tessera/core/staged_work.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

class StagedPipeline {
 public:
  /// `pipeline`: one rank per stage (not owned; must outlive this). `balance`: layers per
  /// stage (each >= 1). Throws tessera::Error naming the group size mismatch.
  StagedPipeline(Communicator& pipeline, std::vector<int> balance, PipelineScheduleKind schedule,
                 ActivationCheckpoint checkpoint);
  /// One step of `work` (its layers must be the balance's sum): this rank's stage of every
  /// micro-batch, forward and backward; then the last stage's report() on every stage.
  void run(StagedWork& work);
  int stages() const { return int(balance_.size()); }

 private:
  struct MicroBatch;
  void forward(StagedWork& work, MicroBatch& mb, int m);
  void backward(StagedWork& work, MicroBatch& mb, int m);
  void send(const TensorBundle& bundle, int destination, int tag);
  TensorBundle receive(int source, int tag);

  Communicator& pipeline_;
  std::vector<int> balance_;
  PipelineScheduleKind schedule_;
  ActivationCheckpoint checkpoint_;
  int first_ = 0, last_ = 0;  // this stage's layers
  std::vector<std::unique_ptr<PendingOperation>> sends_;
};

}  // namespace tessera::parallel
