// apply_auto_plan (auto_train.hpp): the plan's choices as config keys, the file and flags first.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/io/rasterize.hpp"

namespace tessera::engine {
namespace {

void collect_keys(const YAML::Node& node, const std::string& prefix, std::set<std::string>& keys) {
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.as<std::string>();
    keys.insert(key);
    collect_keys(kv.second, key + ".", keys);
  }
}

// Sets the plan's keys that nothing else set, and records each.
class PlanSetter {
 public:
  PlanSetter(RunConfig& c, const std::set<std::string>& file, const std::set<std::string>& flags,
             std::vector<AutoChoice>& out)
      : c_(c), file_(file), flags_(flags), out_(out) {}

  /// Where `key` was given, or "" when the plan may set it.
  std::string given_by(const std::string& key) const {
    if (flags_.count(key)) return "a flag";
    if (file_.count(key)) return "the config file";
    return "";
  }

  template <class T>
  void set(const std::string& key, const T& value, const std::string& why) {
    RunConfig planned = c_;
    if (!set_field(planned, key, value)) throw std::logic_error("apply_auto_plan: no config key " + key);
    const std::string by = given_by(key);
    if (by.empty()) c_ = planned;
    out_.push_back({key, text(value), why, by});
  }
  void note(const std::string& key, const std::string& value, const std::string& why) { out_.push_back({key, value, why, ""}); }

 private:
  // The value as a person writes it (0.99, not YAML's round-trip 0.98999999999999999).
  template <class T>
  static std::string text(const T& v) {
    if constexpr (std::is_same_v<T, std::vector<double>>)
      return fmt::format("[{}]", fmt::join(v, ", "));
    else
      return fmt::format("{}", v);
  }
  RunConfig& c_;
  const std::set<std::string>& file_;
  const std::set<std::string>& flags_;
  std::vector<AutoChoice>& out_;
};

std::string choice_why(const TrainingPlan& p, const std::string& key) {
  for (const PlanChoice& ch : p.choices)
    if (ch.key == key) return ch.why;
  return "";
}

// The network: the plan's U-Net unless the file or a flag names a preset or a model (false).
bool set_model(PlanSetter& s, const TrainingPlan& p) {
  const std::string named = !s.given_by("model.preset").empty() ? "model.preset" : !s.given_by("model.name").empty() ? "model.name" : "";
  if (!named.empty()) {
    s.note("model", "as " + named + " gives it", named + " given by " + s.given_by(named) + ": the plan leaves the network alone");
    return false;
  }
  s.set("model.name", std::string("unet"), "the built-in U-Net family");
  s.set("model.levels", p.levels, choice_why(p, "levels"));
  s.set("model.base_filters", p.base_filters,
        "32 doubling per level (nnU-Net caps at 320; Tessera's U-Net does not cap, the memory model prices the uncapped one)");
  s.set("model.convs_per_level", 2, "two 3x3 convolutions per level (nnU-Net)");
  s.set("model.kernel", 3, "3x3(x3) kernels (nnU-Net)");
  s.set("model.padding", std::string("same"), "same padding: the output is the patch (nnU-Net)");
  s.set("model.norm", std::string("instance"),
        choice_why(p, "norm") + "; ReLU, not leaky ReLU: Tessera's U-Net has one activation");
  return true;
}

// The patch and batch were sized for the plan's own U-Net: with a network named instead they
// stay as configured (another network's memory and alignment).
void set_patch(PlanSetter& s, const TrainingPlan& p, bool planned_network) {
  if (!planned_network) {
    s.note("train.tile", "as configured", "the plan sizes the patch and batch for its own U-Net, not the named network");
    return;
  }
  const int64_t tile = *std::min_element(p.patch.begin(), p.patch.end());
  s.set("train.tile", tile,
        fmt::format("the plan's patch {} has {} as its smallest side; Tessera's trainer draws cubic tiles",
                    fmt::join(p.patch, "x"), tile));
  s.set("train.batch", p.batch, choice_why(p, "batch"));
}

void set_training(PlanSetter& s, const TrainingPlan& p, bool pipeline, bool stages_or_blocks) {
  s.set("train.optimizer", std::string("sgd"), "SGD, momentum 0.99 (nnU-Net; without Nesterov: Tessera's SGD has none)");
  s.set("train.momentum", 0.99, "nnU-Net");
  s.set("train.learning_rate", 0.01, "nnU-Net");
  s.set("train.weight_decay", 3e-5, "nnU-Net");
  s.set("train.schedule", std::string("poly"), "poly decay (1 - step/steps)^0.9 (nnU-Net)");
  s.set("train.power", 0.9, "nnU-Net");
  if (pipeline)
    s.set("train.loss.kind", std::string("ce"), "cross-entropy: Dice losses do not split over a pipeline's micro-batches "
                                                "(nnU-Net: Dice + cross-entropy)");
  else
    s.set("train.loss.kind", std::string("dice_ce"), "Dice + cross-entropy (nnU-Net)");
  s.set("train.foreground_fraction", 0.33, choice_why(p, "foreground_fraction"));
  s.set("train.steps_per_epoch", int64_t{250},
        "nnU-Net's epoch of 250 steps: the validation cases are scored, the best model kept, once per epoch");
  if (stages_or_blocks)
    s.set("train.deep_supervision", false,
          "off: pipeline stages and spatial blocks run the forward themselves, one loss on the full-resolution output "
          "(the plan asks for it)");
  else
    s.set("train.deep_supervision", true, choice_why(p, "deep_supervision"));
}

constexpr double kElasticBudget = 3600;  // seconds: elastic deformation only for runs this long

// nnU-Net's augmentation list in Tessera's keys; elastic deformation by the time budget.
void set_augmentation(PlanSetter& s, int dims, double budget_s) {
  s.set("train.augment", true, "mirroring along every axis (nnU-Net)");
  const double p = 0.2;
  s.set("train.augment_probability", p, "each spatial and intensity augmentation on a fifth of the tiles (nnU-Net)");
  s.set("train.augment_rotation", dims == 3 ? 30.0 : 180.0,
        dims == 3 ? "up to +-30 degrees about every axis (nnU-Net, 3-D)" : "any angle (nnU-Net, 2-D)");
  s.set("train.augment_scaling", 0.3, "zoom 0.7-1.3 (nnU-Net: 0.7-1.4)");
  const bool elastic = budget_s >= kElasticBudget;
  s.set("train.augment_elastic", elastic ? 2.0 : 0.0,
        elastic ? "on: --time-budget of an hour or more; deformations pay off in long runs (2 voxels, smoothed over 8)"
                : "off: no --time-budget of an hour or more; short runs converge better without it (nnU-Net's default is "
                  "off too)");
  s.set("train.augment_blur", 1.0, "Gaussian blur sigma 0.5-1 voxels (nnU-Net)");
  s.set("train.augment_contrast", 0.25, "contrast 0.75-1.25 (nnU-Net)");
  s.set("train.augment_gamma", 0.3, "gamma 0.7-1.3 (nnU-Net: 0.7-1.5)");
  s.set("train.augment_intensity_scale", 0.25, "brightness x 0.75-1.25 (nnU-Net; on every tile)");
  s.set("train.augment_gaussian_noise", 0.1, "Gaussian noise sigma 0.1 in normalised units (nnU-Net: variance up to 0.1)");
  s.note("augmentation", "no low-resolution simulation", "nnU-Net's list has it; Tessera's trainer does not yet");
}

// A dataset's validation cases: fold 0 of kAutoFolds (the split --fold all makes) when it has
// enough cases and nothing else chose them.
void set_validation(PlanSetter& s, const RunConfig& c, const DatasetFingerprint& f, bool split_given) {
  if (c.data.dataset.empty()) return;  // pairs validate on their holdout
  for (const char* key : {"data.validation", "data.fold", "data.folds"})
    if (!s.given_by(key).empty()) {
      s.note("data.folds", "as configured", std::string(key) + " given by " + s.given_by(key) + ": the validation cases are its");
      return;
    }
  if (split_given) {
    s.note("data.folds", std::to_string(c.data.folds), "--fold / --folds given: the validation cases are theirs");
    return;
  }
  const int n = static_cast<int>(f.cases.size());
  if (n < kAutoFolds) {
    s.note("data.folds", "0", fmt::format("{} training cases, fewer than {}: none held out (no validation, no post-processing "
                                          "decision)", n, kAutoFolds));
    return;
  }
  s.set("data.folds", kAutoFolds,
        fmt::format("nnU-Net's 5 folds; this run validates on fold 0 (the split --fold all makes: every {}th case by id "
                    "from the first), and at the end decides the post-processing on those cases (--fold none: no holdout)",
                    kAutoFolds));
  s.set("data.fold", 0, "fold 0 of data.folds");
}

}  // namespace

DatasetFingerprint fingerprint_run_data(const RunConfig& c, const std::string& config) {
  if (!c.data.dataset.empty()) return fingerprint_dataset(config_relative(config, c.data.dataset));
  std::vector<MsdCase> cases;
  for (const PairConfig& p : c.data.pairs) {
    if (io::is_vector_path(p.labels))
      throw Error(p.where + ": " + p.prefix + "labels: " + p.labels +
                  " is polygons; a fingerprint needs label rasters or volumes (burn them with a run without --auto)");
    std::string id = std::filesystem::path(p.image).filename().string();
    id = id.substr(0, id.find('.'));  // case_000.nii.gz -> case_000
    cases.push_back({id, config_relative(config, p.image), config_relative(config, p.labels)});
  }
  std::vector<std::string> names = c.data.class_names;
  for (int k = static_cast<int>(names.size()); k < c.model.options.classes; ++k) names.push_back("class " + std::to_string(k));
  const Holdout holdout = c.data.holdout;
  return fingerprint_cases(config.empty() ? "data.pairs" : config, cases, names,
                           [holdout](const Index& extent) { return training_region(extent, holdout); },
                           c.data.resample.enabled);
}

double parse_time_budget(const std::string& text) {
  const auto bad = [&] {
    return Error("--time-budget " + text + ": expected a duration such as 30m, 1h, 1h30m, 90s or 45 (seconds)");
  };
  double seconds = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    if (j == i) throw bad();
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(text.substr(i, j - i), &used);
      if (used != j - i) throw bad();  // 1.2.3
    } catch (const std::exception&) {
      throw bad();
    }
    if (j == text.size() && i > 0) throw bad();  // 1h30: a number after a unit needs its own
    const char unit = j < text.size() ? text[j] : 's';
    const double scale = unit == 'h' ? 3600 : unit == 'm' ? 60 : unit == 's' ? 1 : 0;
    if (scale == 0) throw bad();
    seconds += v * scale;
    i = j < text.size() ? j + 1 : j;
  }
  if (!(seconds > 0)) throw bad();
  return seconds;
}

std::set<std::string> config_file_keys(const ConfigFile& file) {
  std::set<std::string> keys;
  collect_keys(file.document(), "", keys);
  return keys;
}

AutoPlan apply_auto_plan(RunConfig& c, const std::string& config, const std::set<std::string>& file_keys,
                         const std::set<std::string>& flag_keys, const AutoRequest& request) {
  const std::string where = config.empty() ? "--auto" : config;
  if (c.model.is_dsn()) throw Error(where + ": --auto plans a U-Net; model.kind dsn is not planned");
  const DatasetFingerprint f = fingerprint_run_data(c, config);
  const TrainingPlan p = plan_training(f, plan_resources(1, request.device_memory_gib));
  AutoPlan out;
  out.active = true;
  out.median_shape = p.median_shape;
  PlanSetter s(c, file_keys, flag_keys, out.choices);
  set_patch(s, p, set_model(s, p));
  set_training(s, p, c.parallel.pp > 1, c.parallel.pp > 1 || c.parallel.sp > 1);
  set_augmentation(s, f.dims, request.time_budget_s);
  set_validation(s, c, f, request.split_given);
  if (f.dims == 3 && c.data.resample.enabled) {
    std::vector<double> xyz(p.spacing.rbegin(), p.spacing.rend());
    s.set("data.resample.spacing", xyz, choice_why(p, "spacing") + " (x, y, z)");
  }
  s.note("data.normalization", c.data.normalization.kind, choice_why(p, "normalization"));
  const std::string steps_by = s.given_by("train.steps");
  if (request.time_budget_s > 0 && steps_by.empty()) {
    out.time_budget_s = request.time_budget_s;
  } else {
    s.note("train.steps", std::to_string(c.train.steps),
           request.time_budget_s > 0 ? "given by " + steps_by + " (--time-budget not used)" : "no --time-budget: as configured");
    if (!steps_by.empty()) out.choices.back().given_by = steps_by;
  }
  return out;
}

std::string auto_choice_line(const AutoChoice& ch) {
  std::string s = ch.key + ": " + ch.value + " — " + ch.why;
  if (!ch.given_by.empty()) s += " [overridden: given by " + ch.given_by + "]";
  return s;
}

std::string auto_choices_comment(const std::vector<AutoChoice>& choices) {
  std::string s = "# tessera train --auto: what the dataset's plan chose and why (docs/new-dataset.md)\n";
  for (const AutoChoice& ch : choices) s += "# auto: " + auto_choice_line(ch) + "\n";
  return s;
}

}  // namespace tessera::engine
