// tessera eval --pred P --truth T: per-class Dice, IoU, precision and recall over the whole
// image or the held-back area, optionally HD95 in physical units (engine::evaluate).
#include <cmath>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "tessera/engine/evaluation.hpp"

namespace tessera::cli {
namespace {

struct Flags {
  engine::EvalOptions eval;
  bool json = false;
};

// A number for the table: "-" where undefined (NaN), "inf" where infinite.
std::string cell(double v, int width) {
  char buf[32];
  if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else std::snprintf(buf, sizeof buf, "%*.4f", width, v);
  return buf;
}

void print_table(const engine::Evaluation& e) {
  const bool hd95 = e.options.hd95;
  std::printf("%-14s %8s %8s %9s %8s", "class", "Dice", "IoU", "precision", "recall");
  if (hd95) std::printf(" %10s", "HD95");
  std::printf(" %12s\n", "truth px");
  for (const engine::ClassEvaluation& k : e.classes) {
    const ClassScores& s = k.scores;
    std::printf("%-14s %s %s %s %s", k.name.c_str(), cell(s.dice, 8).c_str(), cell(s.iou, 8).c_str(),
                cell(s.precision, 9).c_str(), cell(s.recall, 8).c_str());
    if (hd95) std::printf(" %s", cell(k.hd95, 10).c_str());
    std::printf(" %12lld\n", static_cast<long long>(s.truth_pixels));
  }
  std::printf("%-14s %8.4f\n", "mean Dice", e.mean_dice);
  if (!hd95) return;
  std::string step;
  for (double v : e.spacing.step) step += (step.empty() ? "" : " x ") + std::to_string(v);
  std::printf("HD95 in %s (pixel %s); '-' where a class is absent from both, inf where from one\n", e.spacing.unit.c_str(),
              step.c_str());
}

void run(const Flags& f) {
  const engine::Evaluation e = engine::evaluate(f.eval);
  if (f.json) std::cout << e.to_json().dump(2) << '\n';
  else print_table(e);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval",
                                 "Per-class Dice, IoU, precision, recall (and with --hd95 the 95th-percentile "
                                 "Hausdorff distance) of a label map against the truth");
  static Flags f;
  cmd->add_option("--pred", f.eval.pred, "Predicted labels (raster or volume)")->required();
  cmd->add_option("--truth", f.eval.truth, "True labels, same size")->required();
  cmd->add_option("--classes", f.eval.classes, "Number of classes (default: largest label seen + 1)");
  cmd->add_option("--names", f.eval.names, "Class names, in order")->delimiter(',');
  cmd->add_option("--holdout-fraction", f.eval.holdout.fraction,
                  "Evaluate only the last fraction of one axis (the area `train` held back)");
  cmd->add_option("--holdout-axis", f.eval.holdout.axis, "x, y or z (default x for rasters, z for volumes)");
  cmd->add_flag("--hd95", f.eval.hd95,
                "Also the 95th-percentile symmetric surface Hausdorff distance per class (MONAI's convention), "
                "in physical units: GeoTIFF pixel size in CRS units, volume spacing in mm. Computed over the "
                "evaluated area only (the held-back part with --holdout-fraction), which is then held in memory: "
                "2 bytes per pixel plus distance maps of each class's bounding box");
  cmd->add_flag("--json", f.json, "Print JSON");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
