#pragma once
// A new dataset's fingerprint and the training plan derived from it (nnU-Net v2's rules, as far
// as Tessera's U-Net can follow them), for `tessera plan --dataset DIR`. Torch-free.
//
// Fingerprint: every labelled case of an MSD / nnU-Net folder (msd_dataset.hpp), or of a
// training config's data.pairs, opened for its extent and spacing (per LPS axis, as training
// reorients volumes), its labels counted per class, and the foreground intensities of the
// training images (io/normalization.hpp's foreground_statistics: the 0.5 / 99.5 percentiles,
// mean and std of the clipped foreground voxels).
//
// Plan, each choice with its reason:
//   spacing   the median spacing per axis; when the coarsest axis is more than 3× the finest
//             other and has fewer than a third of their voxels (nnU-Net's anisotropy rule), that
//             axis takes the 10th percentile of its spacings (not finer than the others);
//   patch     starts at the median shape in voxels at that spacing (its aspect), each side on
//             the pooling grid of its axis, and shrinks the side largest relative to that shape by
//             one grid step while a batch of 2 does not fit the memory given (memory_model.hpp's
//             training model of the U-Net below);
//   pooling   per axis, halve while the side stays >= 8: the bottleneck is 4–8 voxels; Tessera's
//             U-Net pools every axis at once, so its levels are 1 + the fewest pools of any axis;
//   batch     the most that fit, at least 2, at most 5 % of the dataset's voxels per step;
//   and fixed choices (filters 32 doubling up to 320, instance norm + leaky ReLU, deep
//   supervision, poly schedule, 33 % foreground oversampling, the augmentation list).
// Axis order (z, y, x) for volumes, (y, x) for rasters; spacings in mm (volumes) or the
// raster's unit; memory in bytes.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/core/geometry.hpp"
#include "tessera/engine/msd_dataset.hpp"

namespace tessera::engine {

struct CaseFingerprint {
  std::string id;
  Index extent;                  ///< voxels, (z, y, x)
  std::vector<double> spacing;   ///< (z, y, x)
};

struct DatasetFingerprint {
  std::string folder, name, modality;
  int dims = 3;
  std::vector<CaseFingerprint> cases;
  std::vector<std::string> class_names;
  std::vector<double> class_fractions;  ///< share of all labelled voxels per class
  /// Foreground intensities (label > 0) of the one channel.
  double fg_low = 0, fg_high = 0, fg_mean = 0, fg_std = 0;
  int64_t fg_voxels = 0;
};

/// Reads PATH: a folder (dataset.json: MSD v1 or nnU-Net v2), or a training config (YAML file)
/// whose data.dataset is read so, or whose data.pairs are the cases (each on its training
/// region, the holdout left out, as `train --auto` plans them; classes from data.class_names,
/// else model.classes). Throws tessera::Error
/// naming the file.
DatasetFingerprint fingerprint_dataset(const std::string& path);

/// The fingerprint of labelled cases (image and label paths; a config's image/label pairs):
/// each case measured inside `region(extent)` (null: the whole image; a holdout left out),
/// labels counted for `class_names`. `source` names them in errors and the text. `reoriented`
/// (training resamples volumes, data.resample.enabled): a volume is measured as training
/// reorients it, axis flips and permutations undone, so its extent and spacing are per LPS
/// axis and `region` is taken on that extent and read from the voxels it covers there;
/// otherwise in the file's own axis order.
DatasetFingerprint fingerprint_cases(const std::string& source, const std::vector<MsdCase>& cases,
                                     const std::vector<std::string>& class_names,
                                     const std::function<Box(const Index&)>& region, bool reoriented = true);

/// What the plan is sized to.
struct PlanResources {
  int devices = 1;
  int64_t device_memory = 0;  ///< bytes per device
  std::string memory_source;  ///< "--device-memory 16 GiB" or "this machine: half of MemAvailable"
};
/// `devices` of `device_memory_gib` GiB each; 0 GiB: this machine (half of MemAvailable).
PlanResources plan_resources(int devices, double device_memory_gib);

/// One choice and why, in the order they are made.
struct PlanChoice {
  std::string key, value, why;
};

struct TrainingPlan {
  std::vector<double> spacing;     ///< target spacing per axis
  Index median_shape;              ///< the median case at the target spacing, voxels
  Index patch;                     ///< training patch (input sides) per axis
  std::vector<int> pooling;        ///< halvings per axis (bottleneck 4–8 voxels)
  int levels = 0;                  ///< Tessera's U-Net levels: 1 + the fewest pools
  int batch = 2;                   ///< per device
  int64_t predicted_bytes = 0;     ///< training memory of patch × batch (the U-Net below)
  int base_filters = 32, max_filters = 320;
  std::vector<PlanChoice> choices; ///< every choice with its reason
};

/// The plan for `f` sized to `r`. Throws tessera::Error when not even the smallest patch fits.
TrainingPlan plan_training(const DatasetFingerprint& f, const PlanResources& r);

/// The rules' pieces, for tests and the docs.
std::vector<double> target_spacing(const std::vector<std::vector<double>>& spacings, const std::vector<Index>& shapes);
std::vector<int> pooling_per_axis(const Index& patch);
/// A patch side on its pooling grid: rounded up to a multiple of 2^⌊log2(side / 4)⌋ (at least 4).
int64_t side_on_pooling_grid(int64_t side);
/// The next smaller side on the pooling grid: `side` less one grid step (the patch's shrink step).
int64_t smaller_side_on_pooling_grid(int64_t side);
/// Training bytes of the plan's U-Net (dims, 1 channel, `classes`, base 32, instance norm,
/// same padding, `levels`) for `batch` patches of `patch`.
int64_t plan_training_bytes(const Index& patch, int levels, int classes, int batch);

nlohmann::json plan_json(const DatasetFingerprint& f, const TrainingPlan& p);
/// The fingerprint and the plan as text, one choice a line with its reason.
std::string describe_plan(const DatasetFingerprint& f, const TrainingPlan& p);

}  // namespace tessera::engine
