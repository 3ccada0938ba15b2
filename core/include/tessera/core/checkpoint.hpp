#pragma once
// Checkpoints: one file holding the model's parameters and buffers, the optimiser state,
// and a JSON description (architecture, normalisation, class names, step) so that
// `tessera infer --checkpoint` rebuilds the exact network. Written atomically: to a
// temporary beside the target, flushed to disk, then renamed, so a crash never leaves a
// broken checkpoint under the real name nor overwrites a good one.
//
// The file is the LibTorch archive followed by a 24-byte trailer holding its length and
// CRC-32. A reader checks both before using a byte: a damaged file (a byte changed, cut
// short, grown) is refused whole with an Error naming it, never loaded half-way.
// Checkpoints from before the trailer (format version 1) load with a warning.
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "tessera/core/image_source.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

struct CheckpointMeta {
  UNetOptions model;
  Normalization norm;
  std::vector<std::string> class_names;
  int64_t step = 0;
  int64_t epoch = 0;
  /// The trainer's own state for resuming (JSON: sampler random state, validation history);
  /// opaque to everyone else, empty in checkpoints not written by the trainer.
  std::string trainer_state;
};

void save_checkpoint(const std::string& path, UNet& net, const CheckpointMeta& meta,
                     torch::optim::Optimizer* optimizer = nullptr);

struct LoadedCheckpoint {
  UNet net{nullptr};
  CheckpointMeta meta;
};

/// Throws tessera::Error("<path>: …") when missing, damaged (checksum), truncated or not a
/// Tessera checkpoint.
LoadedCheckpoint load_checkpoint(const std::string& path);
/// Restores an optimiser built over the parameters of load_checkpoint(path).net.
void load_optimizer_state(const std::string& path, torch::optim::Optimizer& optimizer);

/// Reads only the description (the whole file is still checked against its checksum).
CheckpointMeta read_checkpoint_meta(const std::string& path);

/// Throws tessera::Error("<path>: …") unless `path` is an intact, readable checkpoint.
void verify_checkpoint(const std::string& path);

}  // namespace tessera
