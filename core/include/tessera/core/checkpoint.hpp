#pragma once
// Checkpoints: one file holding the model's parameters and buffers, the optimiser state,
// and a JSON description (architecture, normalisation, class names, step) so that
// `tessera infer --checkpoint` rebuilds the exact network. core makes the file's bytes
// (checkpoint_bytes) and never writes files; tessera::write_checkpoint_file and RunWriter
// (run/run_writer.hpp) write them staged and durably, so a crash never leaves a broken
// checkpoint under the real name nor overwrites a good one.
//
// The file is the LibTorch archive followed by a 24-byte trailer holding its length and
// CRC-32. A reader checks both before using a byte: a damaged file (a byte changed, cut
// short, grown) is refused whole with an Error naming it, never loaded half-way.
// Checkpoints from before the trailer (format version 1) load with a warning.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/optim/optimizer.h>

#include "tessera/core/colors.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// What the training images looked like, so that inference can say when an input differs
/// (infer's input checks: modality, intensity range, pixel/voxel size). Empty fields: unknown
/// (checkpoints written before it was stored), not checked.
struct TrainingInputs {
  std::string modality;             ///< "CT", "MR", a dataset's channel name; "" for rasters and unknown
  std::vector<double> low, high;    ///< per channel: the 1st and 99th percentiles of the training images
  std::vector<double> spacing;      ///< the first training image's pixel/voxel size, Block axis order
  std::string spacing_unit;         ///< "mm", a CRS unit ("metre", "degree") or "pixel"
  bool operator==(const TrainingInputs&) const = default;
};

struct CheckpointMeta {
  UNetOptions model;
  Normalization norm;
  VolumeResampling resampling;  ///< volumes: the spacing the model was trained at (empty: none)
  std::vector<std::string> class_names;
  std::vector<Rgb> class_colors;   ///< by class id (data.classes); empty: the default palette
  std::string background = "0";    ///< data.background: "0" (class 0 is background) or "none"
  TrainingInputs inputs;
  /// The input window sides the network was trained on, per axis (the tile the trainer read:
  /// S + r + 2ε for valid padding, S for same); inference of a model whose output depends on
  /// the window runs windows of this size (sliding_window.hpp). Empty: unknown (older files).
  std::vector<int64_t> training_window;
  int64_t step = 0;
  int64_t epoch = 0;
  /// The trainer's own state for resuming (JSON: sampler random state, validation history);
  /// opaque to everyone else, empty in checkpoints not written by the trainer.
  std::string trainer_state;
  /// What the file holds beyond the U-Net, as JSON ({"kind": "dsn", "domains": D, "options":
  /// {…}} for a Domain Separation Network, whose other parts are the file's extra module);
  /// empty for a plain U-Net. Inference reads only the U-Net either way.
  std::string extra_model;
};

/// The description as JSON: {"model", "normalization": {"offset", "scale", "kind", "clip_low",
/// "clip_high", "mask"}, "resampling": {"spacing", "image", "labels"} (when enabled),
/// "class_names", "class_colors" ("#rrggbb" each), "background", "training_window" (when known), "inputs": {"modality", "low",
/// "high", "spacing", "spacing_unit"}, "step", "epoch", "trainer_state" (when not empty)} — the one spelling shared by checkpoints
/// and `tessera export`'s model.json. from_json: "step" and "epoch" default to 0, the colours,
/// background and inputs to what files written before them meant (palette, "0", unknown); throws
/// nlohmann::json::exception on a missing field.
void to_json(nlohmann::json& j, const CheckpointMeta& meta);
void from_json(const nlohmann::json& j, CheckpointMeta& meta);

/// The complete checkpoint file (format version 2: LibTorch archive + checksum trailer) of
/// `net`, `meta` and, when given, the optimiser state. No I/O; throws tessera::Error.
/// `extra` (optional): a module stored beside the U-Net (see CheckpointMeta::extra_model).
std::string checkpoint_bytes(UNet& net, const CheckpointMeta& meta, torch::optim::Optimizer* optimizer = nullptr,
                             const torch::nn::Module* extra = nullptr);

struct LoadedCheckpoint {
  UNet net{nullptr};
  CheckpointMeta meta;
};

/// Throws tessera::Error("<path>: …") when missing, damaged (checksum), truncated or not a
/// Tessera checkpoint.
LoadedCheckpoint load_checkpoint(const std::string& path);
/// Restores an optimiser built over the parameters of load_checkpoint(path).net.
void load_optimizer_state(const std::string& path, torch::optim::Optimizer& optimizer);

/// Loads the module stored beside the U-Net into `module` (same structure as when saved).
/// Throws tessera::Error("<path>: …") when the file holds none or its parameters differ.
void load_checkpoint_extra(const std::string& path, torch::nn::Module& module);

/// Reads only the description (the whole file is still checked against its checksum).
CheckpointMeta read_checkpoint_meta(const std::string& path);

/// Throws tessera::Error("<path>: …") unless `path` is an intact, readable checkpoint.
void verify_checkpoint(const std::string& path);

}  // namespace tessera
