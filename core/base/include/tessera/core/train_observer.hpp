#pragma once
// What the trainer reports, and the seam through which its reports leave core. core computes
// and reports; it never writes a file. The trainer (core/trainer.hpp) calls a TrainObserver on
// the training thread of the one replica whose hooks say writes_outputs(), in this order:
// on_begin once, then per step on_step, at an epoch's end on_validation, and whenever a
// checkpoint is due on_checkpoint (last, then step-N when kept, then best when improved).
// tessera::RunWriter (run/run_writer.hpp) is the implementation that writes a run directory
// (metrics.jsonl, checkpoints/); tests may record in memory instead.
//
// Torch-free: a checkpoint arrives as the bytes of the finished file (format in
// core/checkpoint.hpp), so writers need no LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

/// A data-parallel step's gradient communication, as the reporting replica saw it: the
/// "communication" object of a metrics.jsonl step line (absent with one replica).
struct StepCommunication {
  int buckets = 0;         ///< gradient allreduces of the step
  int overlapped = 0;      ///< of them, posted while the backward still ran
  double busy_s = 0;       ///< the union of the allreduces' intervals (post → sum arrived), seconds
  double hidden_s = 0;     ///< the part of busy_s before the backward ended
  double exposed_s = 0;    ///< backward end → every sum arrived: what the step waited, seconds
};

/// One optimiser step: a line of metrics.jsonl.
struct StepMetrics {
  int64_t step = 0;                   ///< 1-based
  int64_t epoch = 0;                  ///< 0-based
  std::optional<double> loss;         ///< global-batch loss; none when no tile had a labelled pixel
  double lr = 0;                      ///< learning rate of this step
  int64_t global_batch = 0;           ///< tiles per optimiser step over all replicas
  int64_t tile = 0;                   ///< inset side S of this step's tiles
  double tiles_per_s = 0;             ///< since this call of train() began
  double pixels_per_s = 0;
  double elapsed_s = 0;               ///< seconds since this call of train() began
  std::optional<double> grad_norm;    ///< global L2 norm before clipping (only when clipping)
  /// The loss's terms by name, unweighted (a DSN: task, reconstruction, difference,
  /// similarity); empty for a plain segmentation loss.
  std::vector<std::pair<std::string, double>> loss_terms;
  std::optional<StepCommunication> communication;  ///< data parallelism's gradient sums (TrainHooks)
};

/// Validation at the end of an epoch: a line of metrics.jsonl.
struct ValidationMetrics {
  int64_t step = 0;
  int64_t epoch = 0;
  double val_mean_dice = 0;                 ///< over the classes the loss scores
  double best = 0;                          ///< best val_mean_dice so far in the run
  std::vector<std::optional<double>> val_dice;  ///< per class; none where absent from truth and prediction
};

enum class CheckpointKind {
  kLast,  ///< the checkpoint to resume from (replaced each time)
  kStep,  ///< kept as step-NNNNNN.pt; only the newest `keep` are kept
  kBest,  ///< the best validation so far
};

/// A finished checkpoint file's bytes (checksummed; core/checkpoint.hpp).
struct CheckpointBytes {
  CheckpointKind kind = CheckpointKind::kLast;
  int64_t step = 0;
  std::string_view bytes;  ///< valid during the call only
  int keep = 1;            ///< kStep: how many step checkpoints to keep, newest first
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  /// Before the first step. `resumed_from` is the step of the checkpoint the run continues
  /// from (records after it belong to the part being redone), or nullopt for a fresh run.
  virtual void on_begin(std::optional<int64_t> /*resumed_from*/) {}
  virtual void on_step(const StepMetrics& /*m*/) {}
  virtual void on_validation(const ValidationMetrics& /*m*/) {}
  /// Throws tessera::Error when the checkpoint cannot be kept (training stops).
  virtual void on_checkpoint(const CheckpointBytes& /*c*/) {}
};

}  // namespace tessera
