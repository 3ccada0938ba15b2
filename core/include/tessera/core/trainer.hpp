#pragma once
// Training for one process: random tiles from image/label pairs, Dice + cross-entropy,
// Adam, metrics.jsonl, atomic checkpoints in RUN/checkpoints/. Tiles are the same
// geometry inference uses (input S + r + 2ε, labels on the S + r output), so a valid
// network trains on exactly what it predicts. Reading runs one batch ahead on a worker.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

struct TrainOptions {
  int64_t tile = 64;             ///< output inset side S of a training tile
  int batch = 4;                 ///< tiles per step and replica (global batch = batch × replicas)
  int64_t steps = 300;           ///< optimiser steps
  double learning_rate = 1e-3;   ///< Adam
  /// Multiply the learning rate by the number of data-parallel replicas (linear scaling
  /// with the global batch). Off by default, so P ranks × batch b equal 1 rank × batch P·b.
  bool scale_learning_rate = false;
  /// Linear warm-up: the learning rate grows from learning_rate / warmup_steps to its full
  /// (possibly scaled) value over the first warmup_steps steps; 0 = none.
  int64_t warmup_steps = 0;
  uint64_t seed = 0;             ///< tiles, augmentation and initialisation
  bool augment = true;           ///< random flips along every spatial axis
  bool sync_batch_norm = false;  ///< batch-norm statistics over the global batch (all replicas)
  double foreground_fraction = 0;  ///< share of tiles centred on a foreground class (balanced over classes)
  int64_t checkpoint_every = 100;
  bool progress = true;
  std::string run_dir;           ///< where metrics.jsonl and checkpoints/ go (required)
  LossOptions loss;

  /// Throws tessera::Error naming the bad field.
  void validate(const UNetOptions& model) const;
};

struct TrainingPair {
  const ImageSource* image = nullptr;
  const ImageSource* labels = nullptr;
  Box region;  ///< the labelled area tiles are drawn from (output pixels), inside the image
};

struct TrainReport {
  int64_t steps = 0;
  double seconds = 0;
  double final_loss = 0;   ///< mean loss over the last 10% of steps
  double tiles_per_second = 0;
  std::string checkpoint;  ///< path of the last checkpoint
};

/// Trains `net` in place. `meta` supplies the description stored with each checkpoint
/// (model, normalisation, class names); its step is filled in. `hooks` (optional, not owned)
/// make this process one replica of a data-parallel run (train_hooks.hpp); without them it
/// trains alone. Only the replica whose hooks say writes_outputs() writes metrics and checkpoints.
TrainReport train(UNet& net, const std::vector<TrainingPair>& data, const TrainOptions& options, CheckpointMeta meta,
                  TrainHooks* hooks = nullptr);

}  // namespace tessera
