#pragma once
// Pipeline-parallel training of a U-Net: its layer sequence (core/layer_sequence.hpp) cut into
// K consecutive stages by a balance (planner.hpp), stage s on rank s of the pipeline group,
// each holding only its layers' parameters (core/unet_stages.hpp). A mini-batch is split into
// M micro-batches (sizes differ by at most one, earlier ones larger) that flow through the
// stages under GPipe (all forwards, then all backwards) or 1F1B (after K − s − 1 warm-up
// forwards, stage s alternates one forward and one backward, so it holds at most min(M, K − s)
// micro-batches' activations). With activation checkpointing (PipelineOptions::checkpoint)
// a micro-batch's forward keeps no graph and is recomputed just before its backward.
//
// Messages, point to point over the pipeline group: a stage's main activation to the next
// stage, every skip tensor straight from the stage producing it to the stage consuming it
// (cropped by the producer; never relayed through the stages in between), and the gradients
// of all of them back the same ways.
//
// Deadlock freedom with blocking send/recv: every rank computes the same global sequence of
// events from the schedule (a list-scheduling of the blocks with unit forward / double
// backward durations, sorted by start time). A message sits just before the block that
// consumes it, and every rank performs its own events in that global order, so the earliest
// pending event always has both of its parties ready.
//
// Loss: on the last stage, decomposed over micro-batches so the sum is exact. Each
// micro-batch contributes loss_from_statistics of its statistics with entry 0 (the weighted
// labelled-pixel count W) replaced by the W of the whole global batch (summed over the data
// group), which depends on the labels only. For `ce` and `focal` this sums to exactly the
// loss of one process on the global batch; other kinds are rejected (their normalisation
// depends on predictions of the whole batch).
//
// Data × pipeline: every replica (rank of the data group, same stage) runs its own local
// batch through its own pipeline; W and the loss are summed over the data group and each
// stage's gradients are summed over it, once per step. Result: the gradients of one process
// with the concatenated global batch (tests/parallel/pipeline_test.cpp).
// Pipeline × spatial: with a SpatialDecomposition, every stage is held by the ranks of a
// spatial group (ProcessGrid::spatial()), each running the stage on its block of every tile
// under a DecompositionScope — forwards, checkpointed recomputations and backwards alike, so
// halo exchanges and whole-image norm statistics happen wherever the stage computes. A message
// goes from a block to the same block of the next (or previous) stage; the loss shares, W and
// the stage's gradients are summed over the spatial group as over the data group.
// Not thread safe; every rank of the pipeline, data and spatial groups calls train_step together.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/core/unet_stages.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {

/// One unit of a stage's work: the forward or the backward of one micro-batch.
struct PipelineBlock {
  int stage = 0;
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PipelineBlock&) const = default;
};

/// The order in which each stage (element s) runs its 2·M blocks under `kind`:
///   GPipe: F0 … F(M−1), then B(M−1) … B0;
///   1F1B:  w = min(K − s − 1, M) forwards, then F(w+i) B(i) pairs, then the remaining B.
/// Throws tessera::Error naming `stages`/`micro_batches` when not positive.
std::vector<std::vector<PipelineBlock>> pipeline_block_order(int stages, int micro_batches,
                                                             PipelineScheduleKind kind);

/// Every stage's blocks in one global order that every rank shares: list scheduling of the
/// blocks of pipeline_block_order (forward 1, backward 2 time units; a block starts when its
/// stage is free and the blocks of the same micro-batch and direction on `sources(b)` have
/// finished), sorted by start time, then by stage.
std::vector<PipelineBlock> pipeline_global_order(int stages, int micro_batches, PipelineScheduleKind kind,
                                                const std::function<std::vector<int>(const PipelineBlock&)>& sources);

struct PipelineOptions {
  std::vector<int> balance;  ///< layers per stage (Σ = layers, each >= 1), one per pipeline rank
  int micro_batches = 1;     ///< M; every rank's local batch must hold at least M samples
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  LossOptions loss = LossOptions().with_kind(LossKind::kCrossEntropy);  ///< ce or focal
  /// Checkpointed micro-batches run their forward without a graph, keep only what they
  /// received, and recompute the forward (bit-identical) just before their backward.
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;
  /// The last stage keeps the last step's logits (PipelineTrainer::last_output; for tests).
  bool keep_output = false;

  explicit PipelineOptions(std::vector<int> balance_) : balance(std::move(balance_)) {}
  PipelineOptions& with_micro_batches(int m) { micro_batches = m; return *this; }
  PipelineOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  PipelineOptions& with_loss(LossOptions l) { loss = std::move(l); return *this; }
  PipelineOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
  PipelineOptions& with_keep_output(bool v) { keep_output = v; return *this; }

  /// Throws tessera::Error naming the bad field (pipeline.balance, pipeline.micro_batches,
  /// pipeline.loss.kind, model.norm) for a sequence of `seq`'s layers.
  void validate(const LayerSequence& seq) const;
};

/// What the last train_step did on this rank.
struct PipelineStepStats {
  double seconds = 0;          ///< wall time of the step, communication included
  double compute_seconds = 0;  ///< forward + backward compute of this stage
  int64_t bytes_sent = 0;      ///< point-to-point, activations and their gradients
  int64_t bytes_received = 0;
  int max_in_flight = 0;       ///< most micro-batches between their forward and backward at once
  int max_graphs_held = 0;     ///< most micro-batches whose whole activations (autograd graph) were held at once
  /// Most bytes of received tensors held at once: forward inputs (and the gradients formed on
  /// them, until sent back) and received output gradients (until used).
  int64_t max_received_bytes_held = 0;
};

class PipelineTrainer {
 public:
  /// Cuts `full` (identical on every rank, e.g. built from the same seed) for input tiles
  /// of side `input_side`; keeps a copy of this rank's stage only. `pipeline` has one rank
  /// per stage (ProcessGrid::pipeline()), `data` the replicas of this stage
  /// (ProcessGrid::data(); a one-rank group without data parallelism). Both must outlive
  /// the trainer. `spatial` (pipeline × spatial, see the header comment; nullptr: whole
  /// tiles) splits every tile of side `input_side` into blocks; it must outlive the trainer.
  /// Throws tessera::Error naming the bad field or the group size mismatch.
  PipelineTrainer(const UNetImpl& full, int64_t input_side, Communicator& pipeline, Communicator& data,
                  PipelineOptions options, const SpatialDecomposition* spatial = nullptr);
  ~PipelineTrainer();
  PipelineTrainer(const PipelineTrainer&) = delete;
  PipelineTrainer& operator=(const PipelineTrainer&) = delete;

  /// One step's forward and backward over this replica's local batch: `input` (N, C,
  /// side…) float, read on stage 0 only; `target` (N, output side…) int64, read on the last
  /// stage only (with a SpatialDecomposition: this rank's blocks of them, SpatialDecomposition::scatter) (other ranks may pass undefined tensors). Stage parameters' gradients are
  /// zeroed first, accumulated over the micro-batches and summed over the data group: they
  /// are the gradients of the global batch's loss, ready for one optimiser step on
  /// stage()->parameters(). Returns that loss on every rank.
  double train_step(const torch::Tensor& input, const torch::Tensor& target);

  UNetStage& stage() { return stage_; }
  int stage_index() const { return stage_index_; }
  int stages() const { return static_cast<int>(options_.balance.size()); }
  const PipelineStepStats& last_step() const { return stats_; }
  /// The last stage's logits of the last step (this rank's block), with
  /// PipelineOptions::keep_output; undefined otherwise.
  const torch::Tensor& last_output() const { return output_; }

 private:
  struct MicroBatch;
  struct Event;
  void build_events();
  std::vector<std::pair<int, int>> block_inputs(const PipelineBlock& b) const;
  std::vector<PipelineBlock> scheduled_blocks() const;
  void forward(MicroBatch& mb, const torch::Tensor& input, const torch::Tensor& target,
               const torch::Tensor& w_total);
  void backward(MicroBatch& mb, const torch::Tensor& w_total);
  torch::Tensor micro_batch_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                 const torch::Tensor& w_total) const;
  void reduce_gradients();
  // A tensor's shape for the whole tile → for this rank's block (unchanged without spatial).
  std::vector<int64_t> block_shape(std::vector<int64_t> shape) const;
  // In place: summed over the data group, and the spatial group when there is one.
  void sum_over_replicas_and_blocks(torch::Tensor& t);
  // train_step's parts: the micro-batches of this step's local batch (its size broadcast from
  // stage 0), a message sent (non-blocking) or received, the loss summed over the replicas.
  std::vector<MicroBatch> split_batch(const torch::Tensor& input, const std::string& where);
  void send(const Event& ev, MicroBatch& mb, std::vector<std::unique_ptr<PendingOperation>>& sends);
  void receive(const Event& ev, MicroBatch& mb);
  double step_loss(const std::vector<MicroBatch>& mbs);

  Communicator& pipeline_;
  Communicator& data_;
  PipelineOptions options_;
  LayerSequence seq_;
  int stage_index_ = 0;
  std::vector<int> stage_of_layer_;
  UNetStage stage_{nullptr};
  std::vector<Event> events_;
  PipelineStepStats stats_;
  const SpatialDecomposition* spatial_ = nullptr;
  int64_t side_ = 0;
  Block block_;  // this rank's block of a tile (spatial_)
  torch::Tensor output_;
};

}  // namespace tessera::parallel
