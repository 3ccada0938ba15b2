#pragma once
// `tessera train` as a library, behind a thin command: a TrainJob assembles the dataset
// (image/label pairs with their holdout, or an MSD / nnU-Net folder; preprocessing: resampling
// onto the network's grid, normalisation; polygon labels burnt onto the image grid), describes
// the model every checkpoint carries, lays the ranks out (data, pipeline or spatial
// parallelism; a Domain Separation Network domain parallel), resumes, trains through
// core's trainer, and reports (the plan, telemetry, communication, halo bytes).
// Torch-free header.
#include <optional>
#include <string>

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
};

/// `config`'s file, then its run_dir relative to that file: what `tessera train` starts from.
RunConfig load_run_config(const std::string& config);

/// A path as a config file gives it, relative to the file.
std::string config_relative(const std::string& config, const std::string& path);

/// Every data path of `c` (pairs, source pairs, target images, dataset) made absolute, read
/// relative to `config`: RUN/config.yaml names its images wherever the run directory is read from.
void absolute_data_paths(RunConfig& c, const std::string& config);

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
