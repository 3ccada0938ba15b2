#pragma once
// `tessera train --auto`: a dataset's plan (dataset_plan.hpp) resolved onto a run's config.
// The data (data.dataset, or data.pairs without their holdout) is fingerprinted, planned for
// the memory given (or this machine's), and every config key the plan decides is set unless
// the config file or a flag set it: the file and the flags win over the plan. Each key the
// plan decides is kept with its value and reason, or with what overrode it, for the head of
// RUN/config.yaml and the stderr report. With a time budget, train.steps is measured at the
// start of the run (engine/src/train/time_budget.cpp). Torch-free.
#include <set>
#include <string>
#include <vector>

#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/run_config.hpp"

namespace tessera::engine {

/// One key the plan decides.
struct AutoChoice {
  std::string key;    ///< dotted config key ("train.tile"), or a plan line without a key ("deep_supervision")
  std::string value;  ///< as the resolved config writes it; the plan's value when overridden
  std::string why;
  std::string given_by;  ///< "" (the plan's value is used), else what set the key ("the config file", "a flag")
};

/// What --auto asks for.
struct AutoRequest {
  double time_budget_s = 0;   ///< --time-budget in seconds; 0: train.steps as configured
  double device_memory_gib = 0;  ///< --device-memory; 0: this machine (half of MemAvailable)
};

/// The resolved plan: its choices, and whether train.steps is still to be measured.
struct AutoPlan {
  std::vector<AutoChoice> choices;
  double time_budget_s = 0;  ///< > 0: measure a few steps, then train.steps = what fits
};

/// Seconds of a --time-budget: "30m", "1h", "1h30m", "90s", "45" (seconds). Throws naming the flag.
double parse_time_budget(const std::string& text);

/// The dotted keys a YAML config sets ("train", "train.tile", "data.resample.spacing"; a list
/// is one key). Empty for an empty path.
std::set<std::string> config_file_keys(const std::string& config);

/// The fingerprint of `c`'s data.dataset (relative to `config`), or of its data.pairs on their
/// training regions (the holdout left out). Throws naming the pair with polygon labels.
DatasetFingerprint fingerprint_run_data(const RunConfig& c, const std::string& config);

/// Fingerprints `c`'s data (paths relative to `config`), plans it, and sets every key the plan
/// decides that neither `file_keys` nor `flag_keys` holds. Throws tessera::Error naming the
/// config or the pair it cannot plan (polygon labels, a model.kind dsn).
AutoPlan apply_auto_plan(RunConfig& c, const std::string& config, const std::set<std::string>& file_keys,
                         const std::set<std::string>& flag_keys, const AutoRequest& request);

/// The choices as YAML comment lines ("# auto: train.tile: 64 — why"), for RUN/config.yaml.
std::string auto_choices_comment(const std::vector<AutoChoice>& choices);

}  // namespace tessera::engine
