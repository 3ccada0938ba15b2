// tessera eval --pred P --truth T: per-class Dice, IoU, precision and recall over the whole
// image or the held-back area, streamed in slabs so any size fits; optionally HD95 in
// physical units over the same area (which then has to fit in memory, one byte per pixel twice).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/metrics.hpp"
#include "tessera/io/hausdorff.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

// Labels are 0..254; 255 (kNoDataLabel), NaN and anything else out of range is "no label".
constexpr int kMaxClasses = 255;

struct Flags {
  std::string pred, truth;
  int classes = 0;
  Holdout holdout;
  bool json = false;
  bool hd95 = false;
  std::vector<std::string> names;
};

bool is_label(float v) { return std::isfinite(v) && v >= 0 && v < kMaxClasses; }

// A number for the table: "-" where undefined (NaN), "inf" where infinite.
std::string cell(double v, int width) {
  char buf[32];
  if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else std::snprintf(buf, sizeof buf, "%*.4f", width, v);
  return buf;
}

// JSON has no NaN or infinity: both become null (the pixel counts tell which case it is).
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

void run(const Flags& f) {
  auto pred = io::open_image(f.pred);
  auto truth = io::open_image(f.truth);
  if (pred->info().extent != truth->info().extent)
    throw Error(f.pred + ": size " + to_string(pred->info().extent) + " differs from the truth " + f.truth + " " +
                to_string(truth->info().extent));
  if (f.classes < 0 || f.classes > kMaxClasses)
    throw Error("--classes " + std::to_string(f.classes) + ": must be in [1, 255]");
  const Index& extent = truth->info().extent;
  f.holdout.validate(static_cast<int>(extent.size()));
  const Box region = f.holdout.fraction > 0 ? holdout_region(extent, f.holdout) : Box{Index(extent.size(), 0), extent};

  ConfusionCounts counts(kMaxClasses);
  // With --hd95 the region's labels are kept (uint8, 255 = no label) for the distance maps.
  Block<uint8_t> pred_labels, truth_labels;
  if (f.hd95) {
    Index shape{1};
    shape.insert(shape.end(), region.size.begin(), region.size.end());
    pred_labels = Block<uint8_t>(shape);
    truth_labels = Block<uint8_t>(shape);
  }
  const int64_t slab = extent.size() == 2 ? 256 : 8;
  size_t offset = 0;
  for (int64_t s = region.origin[0]; s < region.origin[0] + region.size[0]; s += slab) {
    Box b = region;
    b.origin[0] = s;
    b.size[0] = std::min(slab, region.origin[0] + region.size[0] - s);
    Block<float> p = pred->read(b), t = truth->read(b);
    for (float& v : t.data)
      if (!is_label(v)) v = std::numeric_limits<float>::quiet_NaN();  // no truth here
    counts.add(p.data.data(), t.data.data(), static_cast<int64_t>(t.data.size()), float(kNoDataLabel));
    if (f.hd95) {
      // Where the truth has no label the prediction counts nowhere, as for the overlaps.
      for (size_t i = 0; i < t.data.size(); ++i) {
        const bool known = is_label(t.data[i]);
        truth_labels.data[offset + i] = known ? static_cast<uint8_t>(t.data[i]) : kNoDataLabel;
        pred_labels.data[offset + i] = known && is_label(p.data[i]) ? static_cast<uint8_t>(p.data[i]) : kNoDataLabel;
      }
      offset += t.data.size();
    }
  }
  int classes = f.classes;
  if (classes == 0)  // largest label seen + 1
    for (int c = 0; c < kMaxClasses; ++c)
      if (counts.scores(c).truth_pixels + counts.scores(c).predicted_pixels > 0) classes = c + 1;

  const io::GridSpacing spacing = io::grid_spacing(truth->info());
  nlohmann::json j{{"pred", f.pred}, {"truth", f.truth}, {"region", {{"origin", region.origin}, {"size", region.size}}}};
  if (f.hd95) j["hd95_spacing"] = {{"step", spacing.step}, {"unit", spacing.unit}};
  nlohmann::json per = nlohmann::json::array();
  std::vector<double> dice_present, iou_present, hd_present;
  if (!f.json) {
    std::printf("%-14s %8s %8s %9s %8s", "class", "Dice", "IoU", "precision", "recall");
    if (f.hd95) std::printf(" %10s", "HD95");
    std::printf(" %12s\n", "truth px");
  }
  for (int c = 0; c < classes; ++c) {
    const ClassScores s = counts.scores(c);
    const std::string name = c < static_cast<int>(f.names.size()) ? f.names[c] : std::to_string(c);
    nlohmann::json row{{"class", c},
                       {"name", name},
                       {"dice", number(s.dice)},
                       {"iou", number(s.iou)},
                       {"precision", number(s.precision)},
                       {"recall", number(s.recall)},
                       {"truth_pixels", s.truth_pixels},
                       {"predicted_pixels", s.predicted_pixels}};
    double hd = std::numeric_limits<double>::quiet_NaN();
    if (f.hd95) {
      hd = io::hausdorff_distance(pred_labels, truth_labels, c, spacing.step, 95.0);
      row["hd95"] = number(hd);
    }
    per.push_back(row);
    if (s.truth_pixels > 0) {
      dice_present.push_back(s.dice);
      iou_present.push_back(s.iou);
      hd_present.push_back(hd);
    }
    if (!f.json) {
      std::printf("%-14s %s %s %s %s", name.c_str(), cell(s.dice, 8).c_str(), cell(s.iou, 8).c_str(),
                  cell(s.precision, 9).c_str(), cell(s.recall, 8).c_str());
      if (f.hd95) std::printf(" %s", cell(hd, 10).c_str());
      std::printf(" %12lld\n", static_cast<long long>(s.truth_pixels));
    }
  }
  // Means over the classes present in the truth (a class absent there has nothing to find).
  const double mean_dice = dice_present.empty() ? 0.0 : nan_mean(dice_present);
  j["classes"] = per;
  j["mean_dice"] = mean_dice;
  j["mean_iou"] = number(nan_mean(iou_present));
  if (f.hd95) j["mean_hd95"] = number(nan_mean(hd_present));
  if (f.json) {
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::printf("%-14s %8.4f\n", "mean Dice", mean_dice);
  if (f.hd95) {
    std::string step;
    for (double v : spacing.step) step += (step.empty() ? "" : " x ") + std::to_string(v);
    std::printf("HD95 in %s (pixel %s); '-' where a class is absent from both, inf where from one\n",
                spacing.unit.c_str(), step.c_str());
  }
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval",
                                 "Per-class Dice, IoU, precision, recall (and with --hd95 the 95th-percentile "
                                 "Hausdorff distance) of a label map against the truth");
  static Flags f;
  cmd->add_option("--pred", f.pred, "Predicted labels (raster or volume)")->required();
  cmd->add_option("--truth", f.truth, "True labels, same size")->required();
  cmd->add_option("--classes", f.classes, "Number of classes (default: largest label seen + 1)");
  cmd->add_option("--names", f.names, "Class names, in order")->delimiter(',');
  cmd->add_option("--holdout-fraction", f.holdout.fraction,
                  "Evaluate only the last fraction of one axis (the area `train` held back)");
  cmd->add_option("--holdout-axis", f.holdout.axis, "x, y or z (default x for rasters, z for volumes)");
  cmd->add_flag("--hd95", f.hd95,
                "Also the 95th-percentile symmetric surface Hausdorff distance per class (MONAI's convention), "
                "in physical units: GeoTIFF pixel size in CRS units, volume spacing in mm. Computed over the "
                "evaluated area only (the held-back part with --holdout-fraction), which is then held in memory: "
                "2 bytes per pixel plus distance maps of each class's bounding box");
  cmd->add_flag("--json", f.json, "Print JSON");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
