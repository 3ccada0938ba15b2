#pragma once
// `tessera train` as a library, behind a thin command: a TrainJob assembles the dataset
// (image/label pairs with their holdout, or an MSD / nnU-Net folder; preprocessing: resampling
// onto the network's grid, normalisation; polygon labels burnt onto the image grid), describes
// the model every checkpoint carries, lays the ranks out (data, pipeline or spatial
// parallelism; a Domain Separation Network domain parallel), resumes, trains through
// core's trainer, and reports (the plan, telemetry, communication, halo bytes).
// Torch-free header.
#include <functional>
#include <optional>
#include <set>
#include <vector>
#include <string>

#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/run_config.hpp"

namespace tessera::parallel {
class Communicator;
}

namespace tessera::engine {

/// What the command line gives besides config keys.
struct TrainRequest {
  std::string config;          ///< the YAML file: errors name it, relative paths in it are relative to it
  std::optional<int> threads;  ///< intra-op threads (default: cores / ranks on this node)
  std::string resume;          ///< a checkpoint, "auto" (RUN/checkpoints/last.pt or the newest intact), or ""
  std::string profile;         ///< Chrome trace of rank 0's operators, or ""
  AutoPlan auto_plan;          ///< --auto: the plan's choices (config.yaml's head), a time budget to measure
};

/// `config`'s file, then its run_dir relative to that file: what `tessera train` starts from.
RunConfig load_run_config(const std::string& config);
/// The same of a file already parsed (ConfigFile::load): its name is the path.
RunConfig load_run_config(const ConfigFile& file);

/// A path as a config file gives it, relative to the file.
std::string config_relative(const std::string& config, const std::string& path);

/// Every data path of `c` (pairs, source pairs, target images, dataset) made absolute, read
/// relative to `config`: RUN/config.yaml names its images wherever the run directory is read from.
void absolute_data_paths(RunConfig& c, const std::string& config);

/// What `tessera train` takes besides config keys for a planned run and its folds.
struct TrainCommandLine {
  bool auto_plan = false;         ///< --auto: the dataset's plan under the file and the flags (auto_train.hpp)
  std::string time_budget;        ///< --time-budget 30m: train.steps from a measured step time (with --auto)
  double device_memory_gib = 0;   ///< --device-memory for the plan (0: this machine)
  std::string dataset;            ///< --dataset DIR: an MSD / nnU-Net folder (data.dataset), with or without --config
  std::string fold;               ///< --fold K or all ("": data.fold as configured)
  int folds = 0;                  ///< --folds N (0: data.folds, else 5)
};

/// The config (`request.config`, or --dataset alone), `apply_flags` over it, --auto's plan
/// under both (`flag_keys`: the keys the flags set); then one run, or with --fold all one run
/// per fold in RUN/fold-K and the folds' summary (RUN/folds.json, stderr). Throws
/// tessera::Error naming the flag or the file.
void run_train_command(const TrainCommandLine& line, TrainRequest request,
                       const std::function<void(RunConfig&)>& apply_flags, const std::set<std::string>& flag_keys);

/// One fold's validation as its run left it: the best epoch's mean and per-class Dice.
struct FoldResult {
  int fold = 0;
  std::string run_dir;
  double mean_dice = -1;                        ///< -1: the run validated nothing
  std::vector<std::optional<double>> class_dice;  ///< per class at that epoch
  int64_t step = 0;
};
/// The folds' summary as a table (one fold a line, then the mean over folds).
std::string describe_folds(const std::vector<FoldResult>& folds, const std::vector<std::string>& class_names);

class TrainJob {
 public:
  TrainJob(RunConfig config, TrainRequest request);
  /// Collective over parallel::world() (every rank calls it with the same config). Rank 0
  /// writes RUN/config.yaml and prints the plan and the report. Throws tessera::Error naming
  /// the file, the key or the flag.
  void run();

 private:
  RunConfig config_;
  TrainRequest request_;
};

}  // namespace tessera::engine
