#pragma once
// The file side of training: what the trainer reports (core's TrainObserver) written into a
// run directory at RunLayout's paths, and read back. core computes and reports; this writes.
//
//   RUN/metrics.jsonl   one JSON object per line, appended and flushed as reported:
//       step lines        {"step", "epoch", "loss" (null when nothing was labelled), "lr",
//                          "global_batch", "tile", "tiles_per_s", "pixels_per_s", "elapsed_s",
//                          "grad_norm" (only when clipping)}
//       validation lines  {"step", "epoch", "val_mean_dice", "best", "val_dice": [per class or null]}
//   RUN/checkpoints/last.pt, best.pt, step-NNNNNN.pt   staged and durable (write_file_atomically),
//       so a crash never leaves a cut checkpoint under a real name nor replaces a good one.
//
// A resumed run (on_begin with the checkpoint's step) first drops the metrics lines after that
// step: they are from the part of the killed run that is being redone. The metrics codec below
// is the one spelling of the keys, for writers and readers alike. Torch-free, MPI-free; one
// RunWriter per run, used from one thread.
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/train_observer.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera {

class RunWriter final : public TrainObserver {
 public:
  explicit RunWriter(std::string run_dir) : layout_(std::move(run_dir)) {}
  const RunLayout& layout() const { return layout_; }

  /// Creates RUN/checkpoints/; resumed, truncates metrics.jsonl after `resumed_from` and appends,
  /// fresh (nullopt), starts metrics.jsonl empty. Throws tessera::Error naming the file.
  void on_begin(std::optional<int64_t> resumed_from) override;
  void on_step(const StepMetrics& m) override;
  void on_validation(const ValidationMetrics& m) override;
  /// kLast → last.pt, kBest → best.pt, kStep → step-NNNNNN.pt and the older step files beyond
  /// `keep` removed. Throws tessera::Error naming the file.
  void on_checkpoint(const CheckpointBytes& c) override;

 private:
  void append(const std::string& line);

  RunLayout layout_;
  std::ofstream metrics_;
};

/// metrics.jsonl lines (no newline).
std::string metrics_line(const StepMetrics& m);
std::string metrics_line(const ValidationMetrics& m);

/// metrics.jsonl read back, in file order; lines cut by a kill are skipped.
struct MetricsLog {
  std::vector<StepMetrics> steps;
  std::vector<ValidationMetrics> validations;
};
/// Throws tessera::Error naming the file when it cannot be opened.
MetricsLog read_metrics(const std::string& path);

/// Writes a finished checkpoint's bytes (tessera::checkpoint_bytes) to `path`, staged and
/// durably. Throws tessera::Error "<path>: cannot write checkpoint: <reason>"; a file already
/// at `path` is then left as it was.
void write_checkpoint_file(const std::string& path, std::string_view bytes);

}  // namespace tessera
