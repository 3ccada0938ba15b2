// tessera eval --pred P --truth T: per-class Dice and IoU over the whole image or the
// held-back area, streamed in slabs so any size fits.
#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "regions.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::cli {
namespace {

struct Flags {
  std::string pred, truth;
  int classes = 0;
  Holdout holdout;
  bool json = false;
  std::vector<std::string> names;
};

struct Counts {
  std::vector<int64_t> tp, fp, fn;
  explicit Counts(int c) : tp(c), fp(c), fn(c) {}
};

void run(const Flags& f) {
  auto pred = io::open_image(f.pred);
  auto truth = io::open_image(f.truth);
  if (pred->info().extent != truth->info().extent)
    throw Error(f.pred + ": size " + to_string(pred->info().extent) + " differs from the truth " + f.truth + " " +
                to_string(truth->info().extent));
  const Index& extent = truth->info().extent;
  f.holdout.validate(static_cast<int>(extent.size()));
  const Box region = f.holdout.fraction > 0 ? holdout_region(extent, f.holdout) : Box{Index(extent.size(), 0), extent};
  int classes = f.classes;
  Counts counts(std::max(classes, 256));
  int max_label = -1;
  const int64_t slab = extent.size() == 2 ? 256 : 8;
  for (int64_t s = region.origin[0]; s < region.origin[0] + region.size[0]; s += slab) {
    Box b = region;
    b.origin[0] = s;
    b.size[0] = std::min(slab, region.origin[0] + region.size[0] - s);
    const Block<float> p = pred->read(b), t = truth->read(b);
    for (size_t i = 0; i < t.data.size(); ++i) {
      const float tv = t.data[i];
      if (!std::isfinite(tv) || tv < 0 || tv >= 255) continue;  // no truth here
      const int ti = static_cast<int>(tv);
      const float pv = p.data[i];
      const int pi = std::isfinite(pv) && pv >= 0 && pv < 255 ? static_cast<int>(pv) : -1;
      max_label = std::max({max_label, ti, pi});
      if (pi == ti) {
        ++counts.tp[ti];
      } else {
        ++counts.fn[ti];
        if (pi >= 0) ++counts.fp[pi];
      }
    }
  }
  if (classes == 0) classes = max_label + 1;
  nlohmann::json j{{"pred", f.pred}, {"truth", f.truth}, {"region", {{"origin", region.origin}, {"size", region.size}}}};
  nlohmann::json per = nlohmann::json::array();
  double dice_sum = 0;
  int present = 0;
  if (!f.json) std::printf("%-14s %8s %8s %12s\n", "class", "Dice", "IoU", "truth px");
  for (int c = 0; c < classes; ++c) {
    const double tp = double(counts.tp[c]), fp = double(counts.fp[c]), fn = double(counts.fn[c]);
    const bool in_truth = tp + fn > 0;
    const double dice = tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 1.0;
    const double iou = tp + fp + fn > 0 ? tp / (tp + fp + fn) : 1.0;
    const std::string name = c < static_cast<int>(f.names.size()) ? f.names[c] : std::to_string(c);
    per.push_back({{"class", c}, {"name", name}, {"dice", dice}, {"iou", iou}, {"truth_pixels", tp + fn}});
    if (in_truth) {
      dice_sum += dice;
      ++present;
    }
    if (!f.json) std::printf("%-14s %8.4f %8.4f %12.0f\n", name.c_str(), dice, iou, tp + fn);
  }
  j["classes"] = per;
  j["mean_dice"] = present ? dice_sum / present : 0.0;
  if (f.json) std::cout << j.dump(2) << '\n';
  else std::printf("%-14s %8.4f\n", "mean Dice", present ? dice_sum / present : 0.0);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Per-class Dice and IoU of a label map against the truth");
  static Flags f;
  cmd->add_option("--pred", f.pred, "Predicted labels (raster or volume)")->required();
  cmd->add_option("--truth", f.truth, "True labels, same size")->required();
  cmd->add_option("--classes", f.classes, "Number of classes (default: largest label seen + 1)");
  cmd->add_option("--names", f.names, "Class names, in order")->delimiter(',');
  cmd->add_option("--holdout-fraction", f.holdout.fraction,
                  "Evaluate only the last fraction of one axis (the area `train` held back)");
  cmd->add_option("--holdout-axis", f.holdout.axis, "x, y or z (default x for rasters, z for volumes)");
  cmd->add_flag("--json", f.json, "Print JSON");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
