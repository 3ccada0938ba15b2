// run_train_command (train_job.hpp): the config, the flags, --auto's plan, one run or every fold.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine {
namespace {

// --config FILE (`file_keys`: the keys it sets), or --dataset DIR alone (a config of
// data.dataset only; no file keys).
RunConfig base_config(const TrainCommandLine& l, TrainRequest& r, std::set<std::string>& file_keys) {
  if (!r.config.empty()) {
    if (!l.dataset.empty())
      throw Error("--dataset " + l.dataset + ": with --config give the folder as data.dataset in " + r.config);
    const ConfigFile file = ConfigFile::load(r.config);
    file_keys = config_file_keys(file);
    return load_run_config(file);
  }
  if (l.dataset.empty()) throw Error("tessera train: --config FILE or --dataset DIR is required");
  const std::string dir = std::filesystem::absolute(l.dataset).lexically_normal().string();
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "data" << YAML::Value << YAML::BeginMap << YAML::Key << "dataset" << YAML::Value
    << dir << YAML::EndMap << YAML::EndMap;
  r.config = "--dataset " + l.dataset;  // errors name the flag; every path of this config is absolute
  return read_run_config(ConfigFile::parse(e.c_str(), r.config));
}

// --fold K | all and --folds N onto data.fold / data.folds; true for all.
bool set_folds(const TrainCommandLine& l, RunConfig& c) {
  if (l.fold.empty() && l.folds == 0) return false;
  if (l.fold == "none") {  // no validation split: every case trains (--auto holds out fold 0 of 5 otherwise)
    if (l.folds != 0) throw Error("--folds " + std::to_string(l.folds) + ": not with --fold none");
    c.data.folds = 0;
    c.data.fold = 0;
    return false;
  }
  if (c.data.dataset.empty()) throw Error("--fold: needs data.dataset (or --dataset DIR): folds split a dataset's cases");
  if (l.folds < 0 || l.folds == 1) throw Error("--folds " + std::to_string(l.folds) + ": expected 2 or more");
  c.data.folds = l.folds > 0 ? l.folds : c.data.folds > 0 ? c.data.folds : kAutoFolds;
  if (l.fold.empty()) {  // --folds alone: data.fold as configured
    if (c.data.fold < 0 || c.data.fold >= c.data.folds)
      throw Error(fmt::format("--folds {}: data.fold {} is outside 0 … {}", c.data.folds, c.data.fold, c.data.folds - 1));
    return false;
  }
  if (l.fold == "all") {
    c.data.fold = 0;
    return true;
  }
  try {
    size_t used = 0;
    c.data.fold = std::stoi(l.fold, &used);
    if (used != l.fold.size()) throw std::invalid_argument(l.fold);
  } catch (const std::exception&) {
    throw Error("--fold " + l.fold + ": expected a fold number, all or none");
  }
  if (c.data.fold < 0 || c.data.fold >= c.data.folds)
    throw Error(fmt::format("--fold {}: outside 0 … {} (--folds {})", c.data.fold, c.data.folds - 1, c.data.folds));
  return false;
}

FoldResult read_fold(int fold, const std::string& run_dir) {
  FoldResult r;
  r.fold = fold;
  r.run_dir = run_dir;
  for (const ValidationMetrics& v : read_metrics(RunLayout(run_dir).metrics()).validations)
    if (v.val_mean_dice > r.mean_dice) {
      r.mean_dice = v.val_mean_dice;
      r.class_dice = v.val_dice;
      r.step = v.step;
    }
  return r;
}

// The mean Dice over the folds that validated (a fold with no validation is left out); -1 if none did.
double mean_over_folds(const std::vector<FoldResult>& folds) {
  double sum = 0;
  int n = 0;
  for (const FoldResult& f : folds)
    if (f.mean_dice >= 0) sum += f.mean_dice, ++n;
  return n > 0 ? sum / n : -1;
}

nlohmann::json folds_json(const std::vector<FoldResult>& folds, const std::vector<std::string>& names) {
  nlohmann::json list = nlohmann::json::array();
  const auto dice_or_null = [](double d) { return d >= 0 ? nlohmann::json(d) : nlohmann::json(); };
  for (const FoldResult& f : folds) {
    nlohmann::json dice = nlohmann::json::array();
    for (const auto& d : f.class_dice) dice.push_back(d ? nlohmann::json(*d) : nlohmann::json());
    list.push_back({{"fold", f.fold}, {"run_dir", f.run_dir}, {"step", f.step}, {"val_mean_dice", dice_or_null(f.mean_dice)},
                    {"val_dice", dice}});
  }
  return {{"folds", list}, {"class_names", names}, {"mean_dice", dice_or_null(mean_over_folds(folds))}};
}

// Every fold in RUN/fold-K, then the summary (rank 0).
void run_every_fold(const RunConfig& c, const TrainRequest& r) {
  if (c.train.run_dir.empty()) throw Error(r.config + ": run_dir: required (the folds go to RUN/fold-K)");
  std::vector<FoldResult> results;
  const bool root = parallel::world().rank() == 0;
  for (int k = 0; k < c.data.folds; ++k) {
    RunConfig fold = c;
    fold.data.fold = k;
    fold.train.run_dir = (std::filesystem::path(c.train.run_dir) / ("fold-" + std::to_string(k))).string();
    std::fprintf(stderr, "train: fold %d of %d -> %s\n", k, c.data.folds, fold.train.run_dir.c_str());
    TrainJob(fold, r).run();
    if (root) results.push_back(read_fold(k, fold.train.run_dir));
  }
  if (!root) return;
  const std::vector<std::string> names = read_msd_dataset(config_relative(r.config, c.data.dataset)).class_names;
  const std::string path = (std::filesystem::path(c.train.run_dir) / "folds.json").string();
  write_file_atomically(path, {folds_json(results, names).dump(2), "\n"});
  std::cout << describe_folds(results, names) << "folds: " << path << '\n';
}

}  // namespace

std::string describe_folds(const std::vector<FoldResult>& folds, const std::vector<std::string>& names) {
  std::string s = "fold  step  mean Dice";
  for (size_t k = 1; k < names.size(); ++k) s += "  " + names[k];
  s += "\n";
  int validated = 0;
  for (const FoldResult& f : folds) {
    s += f.mean_dice >= 0 ? fmt::format("{:>4}  {:>4}  {:>9.4f}", f.fold, f.step, f.mean_dice)
                          : fmt::format("{:>4}  {:>4}  {:>9}", f.fold, "-", "no val");
    validated += f.mean_dice >= 0;
    for (size_t k = 1; k < names.size(); ++k)
      s += k < f.class_dice.size() && f.class_dice[k] ? fmt::format("  {:>{}.4f}", *f.class_dice[k], names[k].size())
                                                      : fmt::format("  {:>{}}", "-", names[k].size());
    s += "\n";
  }
  const double mean = mean_over_folds(folds);
  if (mean < 0)
    s += fmt::format("mean over folds: none of the {} validated\n", folds.size());
  else if (size_t(validated) == folds.size())
    s += fmt::format("mean over {} folds: {:.4f}\n", folds.size(), mean);
  else
    s += fmt::format("mean over the {} of {} folds that validated: {:.4f}\n", validated, folds.size(), mean);
  return s;
}

void run_train_command(const TrainCommandLine& l, TrainRequest r, const std::function<void(RunConfig&)>& apply_flags,
                       const std::set<std::string>& flag_keys) {
  const bool from_file = !r.config.empty();
  std::set<std::string> file_keys;
  RunConfig c = base_config(l, r, file_keys);
  apply_flags(c);
  const bool every_fold = set_folds(l, c);
  if (every_fold && !r.resume.empty() && r.resume != "auto")
    throw Error("--resume " + r.resume + ": with --fold all each fold resumes from its own RUN/fold-K (--resume auto)");
  if (!l.time_budget.empty() && !l.auto_plan) throw Error("--time-budget " + l.time_budget + ": only with --auto");
  if (l.device_memory_gib != 0 && !l.auto_plan)
    throw Error(fmt::format("--device-memory {}: only with --auto (the plan sizes to it)", l.device_memory_gib));
  if (l.device_memory_gib < 0) throw Error(fmt::format("--device-memory {}: expected GiB > 0", l.device_memory_gib));
  if (l.auto_plan) {
    AutoRequest a;
    a.device_memory_gib = l.device_memory_gib;
    a.split_given = !l.fold.empty() || l.folds != 0;
    if (!l.time_budget.empty()) a.time_budget_s = parse_time_budget(l.time_budget) / (every_fold ? c.data.folds : 1);
    if (parallel::world().size() > 1 && a.device_memory_gib <= 0)
      throw Error("--auto under an MPI launcher needs --device-memory: every rank must plan the same batch and patch, "
                  "and each host's free memory differs");
    const auto planning = std::chrono::steady_clock::now();
    r.auto_plan = apply_auto_plan(c, from_file ? r.config : "", file_keys, flag_keys, a);
    r.auto_plan.planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - planning).count();
  }
  if (every_fold) return run_every_fold(c, r);
  TrainJob(std::move(c), std::move(r)).run();
}

}  // namespace tessera::engine
