// plan_training (dataset_plan.hpp): nnU-Net v2's planning rules on a fingerprint.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/engine/dataset_plan.hpp"

namespace tessera::engine {
namespace {

constexpr double kAnisotropy = 3;          // nnU-Net: an axis 3× coarser is anisotropic
constexpr int64_t kBottleneckMin = 4;      // pool while the side stays >= 2 × this
constexpr double kBatchDatasetShare = 0.05;  // one step sees at most 5 % of the dataset's voxels
constexpr int kMinBatch = 2;

// numpy's percentile (linear interpolation between the sorted values).
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q / 100 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(at)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - double(lo)) * (v[hi] - v[lo]);
}

std::vector<double> column(const std::vector<std::vector<double>>& rows, size_t a) {
  std::vector<double> c;
  for (const auto& r : rows) c.push_back(r[a]);
  return c;
}

std::string sides(const Index& v) { return fmt::format("{}", fmt::join(v, "×")); }
std::string sides(const std::vector<double>& v) { return fmt::format("{:.3g}", fmt::join(v, " × ")); }

}  // namespace

int64_t side_on_pooling_grid(int64_t side) {
  side = std::max(side, kBottleneckMin);
  int p = 0;
  while ((kBottleneckMin << (p + 1)) <= side) ++p;  // floor(log2(side / 4))
  const int64_t step = int64_t{1} << p;
  return (side + step - 1) / step * step;
}

int64_t smaller_side_on_pooling_grid(int64_t side) {
  const int64_t step = int64_t{1} << pooling_per_axis({side})[0];
  return side_on_pooling_grid(side - step);
}

std::vector<double> target_spacing(const std::vector<std::vector<double>>& spacings, const std::vector<Index>& shapes) {
  TESSERA_CHECK(!spacings.empty() && spacings.size() == shapes.size());
  const size_t d = spacings[0].size();
  std::vector<double> target, size;
  for (size_t a = 0; a < d; ++a) {
    target.push_back(percentile(column(spacings, a), 50));
    std::vector<double> s;
    for (const Index& sh : shapes) s.push_back(double(sh[a]));
    size.push_back(percentile(s, 50));
  }
  const size_t worst = size_t(std::max_element(target.begin(), target.end()) - target.begin());
  double other_spacing = 0, other_size = std::numeric_limits<double>::max();
  for (size_t a = 0; a < d; ++a)
    if (a != worst) {
      other_spacing = std::max(other_spacing, target[a]);
      other_size = std::min(other_size, size[a]);
    }
  if (d > 1 && target[worst] > kAnisotropy * other_spacing && size[worst] * kAnisotropy < other_size)
    target[worst] = std::max(percentile(column(spacings, worst), 10), other_spacing);
  return target;
}

std::vector<int> pooling_per_axis(const Index& patch) {
  std::vector<int> pools;
  for (int64_t side : patch) {
    int p = 0;
    while (side % (int64_t{2} << p) == 0 && side / (int64_t{2} << p) >= kBottleneckMin) ++p;
    pools.push_back(p);
  }
  return pools;
}

int64_t plan_training_bytes(const Index& patch, int levels, int classes, int batch) {
  const UNetOptions model = UNetOptions()
                                .with_dims(static_cast<int>(patch.size()))
                                .with_in_channels(1)
                                .with_classes(classes)
                                .with_levels(levels)
                                .with_base_filters(32)
                                .with_padding(Padding::kSame)
                                .with_norm(Norm::kInstance);
  const LayerSequence seq = box_layer_sequence(model, patch);
  const int last = static_cast<int>(seq.layers.size()) - 1;
  return stage_terms(seq, 0, last, /*training=*/true, {}).bytes(batch, ActivationCheckpoint::kNever);
}

namespace {

// Median shape in voxels at the target spacing (each case resampled, then the median per axis).
Index median_shape_at(const DatasetFingerprint& f, const std::vector<double>& spacing) {
  Index shape;
  for (size_t a = 0; a < spacing.size(); ++a) {
    std::vector<double> v;
    for (const CaseFingerprint& c : f.cases) v.push_back(double(c.extent[a]) * c.spacing[a] / spacing[a]);
    shape.push_back(std::max<int64_t>(1, std::llround(percentile(v, 50))));
  }
  return shape;
}

int levels_of(const Index& patch) {
  const std::vector<int> pools = pooling_per_axis(patch);
  return 1 + *std::min_element(pools.begin(), pools.end());
}

// The median shape's aspect on the pooling grid, shrunk (the side largest relative to the
// shape, one grid step) until a batch of 2 fits.
Index fitting_patch(const Index& shape, int classes, int64_t budget, std::string& why) {
  Index patch;
  for (int64_t s : shape) patch.push_back(side_on_pooling_grid(s));
  int shrunk = 0;
  while (plan_training_bytes(patch, levels_of(patch), classes, kMinBatch) > budget) {
    size_t axis = patch.size();
    double worst = 0;
    for (size_t a = 0; a < patch.size(); ++a)
      if (patch[a] > kBottleneckMin && double(patch[a]) / double(shape[a]) > worst) {
        worst = double(patch[a]) / double(shape[a]);
        axis = a;
      }
    if (axis == patch.size())
      throw Error("plan: not even a " + sides(patch) + " patch of batch 2 fits " + format_bytes(budget) +
                  " per device; give more --device-memory");
    patch[axis] = smaller_side_on_pooling_grid(patch[axis]);
    ++shrunk;
  }
  why = shrunk == 0 ? "the whole median shape " + sides(shape) + " on the pooling grid fits a batch of 2"
                    : fmt::format("the median shape {} on the pooling grid, its relatively largest side shrunk {} times "
                                  "by a grid step until a batch of 2 fits",
                                  sides(shape), shrunk);
  return patch;
}

// The choices nnU-Net makes the same way for every dataset, and the normalisation by modality.
void add_fixed_choices(const DatasetFingerprint& f, TrainingPlan& p) {
  std::string filters;
  for (int l = 0; l < p.levels; ++l) filters += (l ? ", " : "") + std::to_string(std::min(32 << l, 320));
  p.choices.push_back({"filters", filters, "32 doubling per level up to 320 (nnU-Net)"});
  p.choices.push_back({"norm", "instance, leaky ReLU",
                       "statistics per sample and patch, independent of the batch of 2 (nnU-Net); inference then runs "
                       "windows of the patch (tessera infer --window auto)"});
  p.choices.push_back({"deep_supervision", "on",
                       "a loss at every decoder level through a 1x1 head of its own, weights halving per level, the lowest "
                       "0, normalised (nnU-Net): the lower levels learn the layout directly (train.deep_supervision)"});
  p.choices.push_back({"schedule", "SGD, Nesterov 0.99, lr 0.01, poly (1 - step/steps)^0.9", "nnU-Net"});
  p.choices.push_back({"foreground_fraction", "0.33",
                       "a third of the patches centred on a foreground class: small structures are seen"});
  const bool ct = f.modality == "CT";
  p.choices.push_back(
      {"normalization", ct ? fmt::format("ct: clip [{:.4g}, {:.4g}], mean {:.4g}, std {:.4g}", f.fg_low, f.fg_high,
                                         f.fg_mean, f.fg_std)
                           : "z-score per image (mr)",
       ct ? "CT intensities mean the same in every scan: the foreground's 0.5/99.5 percentiles, mean and std"
          : "not CT (" + (f.modality.empty() ? std::string("modality not given") : f.modality) +
                "): intensities differ per scan, each image by its own mean and std"});
  p.choices.push_back({"augmentation",
                       "rotation and scaling, gaussian noise, gaussian blur, brightness, contrast, low resolution, "
                       "gamma, mirroring",
                       "nnU-Net's default list; tessera train --auto turns on all but low resolution (elastic deformation "
                       "only with a --time-budget of an hour or more)"});
}

}  // namespace

PlanResources plan_resources(int devices, double device_memory_gib) {
  PlanResources r;
  r.devices = devices;
  if (device_memory_gib > 0) {
    r.device_memory = static_cast<int64_t>(device_memory_gib * double(int64_t{1} << 30));
    r.memory_source = fmt::format("--device-memory {} GiB", device_memory_gib);
  } else {
    r.device_memory = default_memory_budget();
    r.memory_source = "this machine: " + format_bytes(r.device_memory) + ", half of MemAvailable";
  }
  return r;
}

TrainingPlan plan_training(const DatasetFingerprint& f, const PlanResources& r) {
  TrainingPlan p;
  std::vector<std::vector<double>> spacings;
  std::vector<Index> shapes;
  for (const CaseFingerprint& c : f.cases) {
    spacings.push_back(c.spacing);
    shapes.push_back(c.extent);
  }
  p.spacing = target_spacing(spacings, shapes);
  const auto median = [&](size_t a) { return percentile(column(spacings, a), 50); };
  bool anisotropic = false;
  for (size_t a = 0; a < p.spacing.size(); ++a) anisotropic |= p.spacing[a] != median(a);
  p.choices.push_back({"spacing", sides(p.spacing),
                       anisotropic ? "the median spacing, but its coarsest axis is over 3x the others and has under a "
                                     "third of their voxels: that axis at the 10th percentile of its spacings"
                                   : "the median spacing of the cases"});
  p.median_shape = median_shape_at(f, p.spacing);
  const int classes = static_cast<int>(std::max<size_t>(2, f.class_names.size()));
  std::string why;
  p.patch = fitting_patch(p.median_shape, classes, r.device_memory, why);
  p.choices.push_back({"patch", sides(p.patch), why + " (" + r.memory_source + ")"});
  p.pooling = pooling_per_axis(p.patch);
  p.levels = levels_of(p.patch);
  p.choices.push_back({"pooling", fmt::format("{}", fmt::join(p.pooling, ", ")),
                       "per axis, halvings while the side stays >= 8: a bottleneck of 4-8 voxels"});
  p.choices.push_back({"levels", std::to_string(p.levels),
                       "Tessera's U-Net pools every axis at once: 1 + the fewest pools of any axis"});
  int64_t dataset_voxels = 0, patch_voxels = 1;
  for (const CaseFingerprint& c : f.cases) {
    double v = 1;
    for (size_t a = 0; a < c.extent.size(); ++a) v *= double(c.extent[a]) * c.spacing[a] / p.spacing[a];
    dataset_voxels += int64_t(v);
  }
  for (int64_t s : p.patch) patch_voxels *= s;
  const int cap = std::max(kMinBatch, int(std::llround(kBatchDatasetShare * double(dataset_voxels) / double(patch_voxels))));
  while (p.batch < cap && plan_training_bytes(p.patch, p.levels, classes, p.batch + 1) <= r.device_memory) ++p.batch;
  p.predicted_bytes = plan_training_bytes(p.patch, p.levels, classes, p.batch);
  p.choices.push_back({"batch", fmt::format("{} per device, {} in all", p.batch, p.batch * r.devices),
                       fmt::format("the most that fit ({} predicted), at least 2, at most 5 % of the dataset's voxels "
                                   "per step ({})",
                                   format_bytes(p.predicted_bytes), cap)});
  add_fixed_choices(f, p);
  return p;
}

}  // namespace tessera::engine
