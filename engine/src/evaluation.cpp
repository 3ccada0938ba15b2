#include "tessera/engine/evaluation.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/label_sidecars.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::engine {
namespace {

constexpr int kMaxClasses = 255;  // labels 0..254; 255 (kNoDataLabel) is "no label"

bool is_label(float v) { return std::isfinite(v) && v >= 0 && v < kMaxClasses; }

// JSON has no NaN or infinity: both become null (the pixel counts tell which case it is).
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// The region's confusion counts, read in slabs; with `keep` its labels too (uint8, 255 = no
// label; where the truth has none the prediction counts nowhere, as for the overlaps).
struct Counted {
  ConfusionCounts counts{kMaxClasses};
  Block<uint8_t> pred, truth;
};

Counted count_region(const ImageSource& pred, const ImageSource& truth, const Box& region, bool keep) {
  Counted c;
  if (keep) {
    Index shape{1};
    shape.insert(shape.end(), region.size.begin(), region.size.end());
    c.pred = Block<uint8_t>(shape);
    c.truth = Block<uint8_t>(shape);
  }
  const int64_t slab = region.size.size() == 2 ? 256 : 8;
  size_t offset = 0;
  for (int64_t s = region.origin[0]; s < region.origin[0] + region.size[0]; s += slab) {
    Box b = region;
    b.origin[0] = s;
    b.size[0] = std::min(slab, region.origin[0] + region.size[0] - s);
    Block<float> p = pred.read(b), t = truth.read(b);
    for (float& v : t.data)
      if (!is_label(v)) v = std::numeric_limits<float>::quiet_NaN();  // no truth here
    c.counts.add(p.data.data(), t.data.data(), static_cast<int64_t>(t.data.size()), float(kNoDataLabel));
    if (!keep) continue;
    for (size_t i = 0; i < t.data.size(); ++i) {
      const bool known = is_label(t.data[i]);
      c.truth.data[offset + i] = known ? static_cast<uint8_t>(t.data[i]) : kNoDataLabel;
      c.pred.data[offset + i] = known && is_label(p.data[i]) ? static_cast<uint8_t>(p.data[i]) : kNoDataLabel;
    }
    offset += t.data.size();
  }
  return c;
}

// --names, else the checkpoint's, else the prediction's or the truth's own (categories, side files).
std::vector<std::string> class_names(const EvalOptions& o) {
  if (!o.names.empty()) return o.names;
  if (!o.checkpoint.empty()) return read_checkpoint_meta(o.checkpoint).class_names;
  for (const std::string& path : {o.pred, o.truth}) {
    std::vector<std::string> names = io::label_class_names(path);
    if (!names.empty()) return names;
  }
  return {};
}

}  // namespace

void EvalOptions::validate() const {
  if (pred.empty()) throw Error("eval: --pred is required");
  if (truth.empty()) throw Error("eval: --truth is required");
  if (classes < 0 || classes > kMaxClasses) throw Error("--classes " + std::to_string(classes) + ": must be in [1, 255]");
  if (!(holdout.fraction >= 0 && holdout.fraction < 1))
    throw Error("--holdout-fraction " + std::to_string(holdout.fraction) + ": must be in [0, 1)");
  if (!holdout.axis.empty() && holdout.axis != "x" && holdout.axis != "y" && holdout.axis != "z")
    throw Error("--holdout-axis '" + holdout.axis + "': must be x, y or z");
}

Evaluation evaluate(const EvalOptions& o) {
  o.validate();
  auto pred = io::open_image(o.pred);
  auto truth = io::open_image(o.truth);
  if (pred->info().extent != truth->info().extent)
    throw Error(o.pred + ": size " + to_string(pred->info().extent) + " differs from the truth " + o.truth + " " +
                to_string(truth->info().extent));
  const Index& extent = truth->info().extent;
  o.holdout.validate(static_cast<int>(extent.size()));
  Evaluation e;
  e.options = o;
  e.region = o.holdout.fraction > 0 ? holdout_region(extent, o.holdout) : Box{Index(extent.size(), 0), extent};
  e.spacing = io::grid_spacing(truth->info());
  const Counted counted = count_region(*pred, *truth, e.region, o.hd95);
  int classes = o.classes;
  if (classes == 0)  // largest label seen + 1
    for (int c = 0; c < kMaxClasses; ++c)
      if (counted.counts.scores(c).truth_pixels + counted.counts.scores(c).predicted_pixels > 0) classes = c + 1;
  std::vector<double> dice_present, iou_present, hd_present;
  const std::vector<std::string> names = class_names(o);
  for (int c = 0; c < classes; ++c) {
    const bool named = c < static_cast<int>(names.size()) && !names[size_t(c)].empty();
    ClassEvaluation k{c, named ? names[size_t(c)] : std::to_string(c),
                      counted.counts.scores(c), std::numeric_limits<double>::quiet_NaN()};
    if (o.hd95) k.hd95 = io::hausdorff_distance(counted.pred, counted.truth, c, e.spacing.step, 95.0);
    if (k.scores.truth_pixels > 0) {  // a class absent from the truth has nothing to find
      dice_present.push_back(k.scores.dice);
      iou_present.push_back(k.scores.iou);
      hd_present.push_back(k.hd95);
    }
    e.classes.push_back(std::move(k));
  }
  e.mean_dice = dice_present.empty() ? 0.0 : nan_mean(dice_present);
  e.mean_iou = nan_mean(iou_present);
  e.mean_hd95 = o.hd95 ? nan_mean(hd_present) : std::numeric_limits<double>::quiet_NaN();
  return e;
}

nlohmann::json Evaluation::to_json() const {
  nlohmann::json j{{"pred", options.pred}, {"truth", options.truth},
                   {"region", {{"origin", region.origin}, {"size", region.size}}}};
  if (options.hd95) j["hd95_spacing"] = {{"step", spacing.step}, {"unit", spacing.unit}};
  nlohmann::json per = nlohmann::json::array();
  for (const ClassEvaluation& k : classes) {
    nlohmann::json row{{"class", k.label},
                       {"name", k.name},
                       {"dice", number(k.scores.dice)},
                       {"iou", number(k.scores.iou)},
                       {"precision", number(k.scores.precision)},
                       {"recall", number(k.scores.recall)},
                       {"truth_pixels", k.scores.truth_pixels},
                       {"predicted_pixels", k.scores.predicted_pixels}};
    if (options.hd95) row["hd95"] = number(k.hd95);
    per.push_back(row);
  }
  j["classes"] = per;
  j["mean_dice"] = mean_dice;
  j["mean_iou"] = number(mean_iou);
  if (options.hd95) j["mean_hd95"] = number(mean_hd95);
  return j;
}

namespace {

// A number for the table: "-" where undefined (NaN), "inf" where infinite.
std::string cell(double v, int width) {
  char buf[32];
  if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else std::snprintf(buf, sizeof buf, "%*.4f", width, v);
  return buf;
}

}  // namespace

void print_evaluation(const Evaluation& e) {
  const bool hd95 = e.options.hd95;
  std::printf("%-14s %8s %8s %9s %8s", "class", "Dice", "IoU", "precision", "recall");
  if (hd95) std::printf(" %10s", "HD95");
  std::printf(" %12s\n", "truth px");
  for (const ClassEvaluation& k : e.classes) {
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

void run_eval(const EvalOptions& options) {
  const Evaluation e = evaluate(options);
  if (options.json) std::cout << e.to_json().dump(2) << '\n';
  else print_evaluation(e);
}

}  // namespace tessera::engine
