#pragma once
// Training for one process (or one data-parallel replica, through TrainHooks): random tiles
// from image/label pairs, a segmentation loss, a choice of optimisers and schedules,
// validation per epoch, resumable checkpoints. The trainer computes and reports (metrics
// records, checkpoint bytes) to a TrainObserver; it writes no file itself. RunWriter
// (tessera/run/run_writer.hpp) turns the reports into RUN/metrics.jsonl and RUN/checkpoints/.
// Tiles are the same geometry inference uses (input S + r + 2ε, labels on the S + r output),
// so a valid network trains on exactly what it predicts. Reading runs ahead of the network
// on a background thread through a bounded queue.
//
// Resume. A checkpoint holds the model, the optimiser state, the step, and the tile
// sampler's random state as it was before the next batch was drawn; the schedule is a
// function of the step. So `resume` continues a killed run with the same batches and the
// same per-step losses as the uninterrupted run (same thread count; tests/core/trainer_test).
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/optim.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/core/train_observer.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// From epoch `from_epoch` (0-based) on, train on tiles of inset side `tile`.
struct CurriculumStage {
  int64_t from_epoch = 0;
  int64_t tile = 64;
};

struct TrainOptions {
  int64_t tile = 64;             ///< output inset side S of a training tile
  int batch = 4;                 ///< tiles per micro-batch and replica (global batch = batch × replicas)
  int accumulate = 1;            ///< micro-batches per optimiser step (gradients averaged)
  int64_t steps = 300;           ///< optimiser steps
  int64_t steps_per_epoch = 100; ///< an epoch: validation, curriculum switches, early stopping
  OptimizerOptions optimizer;    ///< kind, learning rate, warm-up and schedule
  /// Multiply the learning rate by the number of data-parallel replicas (linear scaling
  /// with the global batch). Off by default, so P ranks × batch b equal 1 rank × batch P·b.
  bool scale_learning_rate = false;
  double grad_clip = 0;          ///< max global L2 norm of the gradient; 0 = no clipping
  std::vector<CurriculumStage> curriculum;  ///< tile sides by epoch; empty = `tile` throughout
  uint64_t seed = 0;             ///< tiles, augmentation and initialisation
  bool augment = true;           ///< random flips along every spatial axis
  /// Further augmentation, all off by default, drawn from the same seeded stream and applied
  /// to image and labels alike: 90° rotations in the last two axes (square tiles), intensity
  /// x·s + t with s ~ U[1 − scale, 1 + scale] and t ~ U[−shift, shift] (normalised units),
  /// Gaussian noise N(0, σ²) and uniform noise U[−u, u]. Then nnU-Net's (core/src/augmentation.hpp),
  /// each on a tile with `probability`: rotation by up to ±`rotation` degrees (3-D: about every
  /// axis), zoom z ~ U[1 − scaling, 1 + scaling], an elastic displacement of `elastic` voxels
  /// (standard deviation) smoothed over `elastic_sigma` voxels, Gaussian blur σ ~ U[blur/2, blur]
  /// voxels, contrast c ~ U[1 − contrast, 1 + contrast] about the tile's mean, gamma
  /// γ ~ U[1 − gamma, 1 + gamma] on the tile's range. Labels move with the image (nearest).
  struct Augmentation {
    bool rotate90 = false;
    double intensity_scale = 0;
    double intensity_shift = 0;
    double gaussian_noise = 0;
    double uniform_noise = 0;
    double rotation = 0;       ///< degrees
    double scaling = 0;
    double elastic = 0;        ///< voxels
    double elastic_sigma = 8;  ///< voxels
    double blur = 0;           ///< voxels
    double contrast = 0;
    double gamma = 0;
    double probability = 1;
  } augmentation;
  bool sync_batch_norm = false;  ///< batch-norm statistics over the global batch (all replicas)
  double foreground_fraction = 0;  ///< share of tiles centred on a foreground class (balanced over classes)
  /// nnU-Net's deep supervision: the decoder's lower levels each add a loss at their
  /// resolution through a 1×1 head of their own (weights halving per level, the lowest 0,
  /// normalised); the heads are kept beside the U-Net, inference runs the U-Net alone.
  /// Built-in U-Net, `same` padding. Off: the loss is the full-resolution output's alone.
  bool deep_supervision = false;
  int prefetch = 2;              ///< batches read ahead of the network (bounded queue)
  /// Weights and activations channels-last (NHWC / NDHWC) during training: the faster
  /// layout for CPU convolutions (about 2x per step with 2 ranks on 2 cores here); the
  /// arithmetic is the same up to float rounding.
  bool channels_last = true;
  /// "fp32", or "bf16": mixed precision — the forward runs under autocast in bfloat16
  /// (convolutions in bf16, reductions and the loss in fp32); parameters, gradients and the
  /// optimiser stay fp32. Not bit-equal to fp32; exactness tests run fp32.
  std::string precision = "fp32";
  int64_t checkpoint_every = 100;
  int keep_last = 1;             ///< also keep step-NNNNNN.pt for the last N checkpoints (1 = last.pt only)
  int64_t early_stopping = 0;    ///< stop after this many epochs without a better validation Dice; 0 = off
  bool progress = true;
  std::string run_dir;           ///< the run directory (required): checkpoint paths in reports and errors
  /// A checkpoint of this run to continue from (usually RUN/checkpoints/last.pt); empty = start.
  std::string resume;
  LossOptions loss;

  /// Throws tessera::Error naming the bad field.
  void validate(const UNetOptions& model) const;
  /// The tile side at `epoch` (0-based), following the curriculum.
  int64_t tile_at_epoch(int64_t epoch) const;
};

struct TrainingPair {
  const ImageSource* image = nullptr;
  const ImageSource* labels = nullptr;  ///< null: unlabelled (a DSN target domain; every pixel ignored)
  Box region;  ///< the labelled area tiles are drawn from (output pixels), inside the image
  /// This image's own normalisation (per-image kinds such as "mr"); null: the run's (meta.norm).
  const Normalization* norm = nullptr;
};

struct TrainReport {
  int64_t steps = 0;          ///< optimiser steps taken in this call (after a resume: from its step)
  int64_t last_step = 0;      ///< the run's step count at the end
  double seconds = 0;
  double final_loss = 0;      ///< mean loss over the last 10% of steps
  double tiles_per_second = 0;
  double best_validation = -1;  ///< best mean validation Dice (classes as loss.include_background); −1 = none
  bool stopped_early = false;
  std::string checkpoint;       ///< path of the last checkpoint
  std::string best_checkpoint;  ///< RUN/checkpoints/best.pt when validated
};

/// Trains `net` in place. `meta` supplies the description stored with each checkpoint
/// (model, normalisation, class names); its step is filled in. `validation` pairs (optional)
/// are evaluated at the end of every epoch by tiled inference over their regions: per-class
/// Dice over the whole validation set is reported, the best model as a kBest checkpoint.
/// `hooks` (optional, not owned) make this process one replica of a data-parallel run
/// (train_hooks.hpp); without them it trains alone. `observer` (optional, not owned) receives
/// the metrics and checkpoints (usually a RunWriter on options.run_dir); only the replica
/// whose hooks say writes_outputs() reports to it. Without an observer nothing is kept.
TrainReport train(UNet& net, const std::vector<TrainingPair>& data, const TrainOptions& options, CheckpointMeta meta,
                  TrainHooks* hooks = nullptr, const std::vector<TrainingPair>& validation = {},
                  TrainObserver* observer = nullptr);

}  // namespace tessera
