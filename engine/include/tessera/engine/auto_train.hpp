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
  bool split_given = false;      ///< --fold or --folds given (none too): the plan does not choose the validation cases
};

/// --auto on a dataset of at least this many training cases, with no validation split given
/// (data.validation, data.fold, data.folds, --fold, --folds), validates on fold 0 of
/// kAutoFolds (nnU-Net: fold 0 of its 5); the post-processing is decided on those cases.
inline constexpr int kAutoFolds = 5;

/// The resolved plan: its choices, and whether train.steps is still to be measured.
struct AutoPlan {
  std::vector<AutoChoice> choices;
  double time_budget_s = 0;  ///< > 0: shape the step to the budget, measure it, then train.steps = what fits
  Index median_shape;        ///< the plan's median case at its spacing, voxels (the context a patch keeps)
  double planning_s = 0;     ///< spent fingerprinting and planning, before the job: counted in the budget
  bool active = false;       ///< --auto: at the end the validation cases (of data.dataset) decide the post-processing
};

/// What one optimiser step trains, as --time-budget shapes it: a U-Net of `levels` levels and
/// `base_filters` on `batch` cubic tiles of side `tile` (the trainer draws cubes).
struct StepShape {
  int64_t tile = 0;
  int levels = 0;
  int base_filters = 0;
  int batch = 0;
};

/// Forward FLOPs of one step of `s`: batch × the U-Net's on one tile (`model`'s other options).
double step_flops(const UNetOptions& model, const StepShape& s);

/// The shape a time budget affords, and why.
struct ShapeFit {
  StepShape shape;
  double predicted_steps = 0;
  std::string why;
};

/// --time-budget's rule: the plan's step (`planned`) is given back in nnU-Net's order of
/// what matters least, until `seconds` at `seconds_per_flop` (measured) affords
/// kMinBudgetSteps steps: (1) the batch to 2, nnU-Net's minimum (it grows the batch only with
/// memory left over); (2) the patch by pooling-grid steps, the side keeping at least half the
/// median case's smallest side (`context_side`; context decides where an organ is);
/// (3) the filters halved, down to 16; (4) the patch again, down to 32 (3 pools to a 4-voxel
/// bottleneck: 4 levels). Levels follow the patch (bottleneck 4–8). A key in `fixed` (given
/// by the file or a flag: train.batch, train.tile, model.base_filters, model.levels) is not
/// changed. When even the last shape affords fewer steps, it is kept and the reason says so.
ShapeFit fit_step_shape(const StepShape& planned, const std::set<std::string>& fixed, const UNetOptions& model,
                        int64_t context_side, double seconds_per_flop, double seconds);

/// The smallest shape fit_step_shape can reach from `planned` (what the rate is measured on).
StepShape smallest_step_shape(const StepShape& planned, const std::set<std::string>& fixed);

/// Fewest steps a time budget should afford: 4 of nnU-Net's 250-step epochs (its shortest
/// trainer variants run 1 250); below it the poly schedule's high-rate phase is too short.
inline constexpr int64_t kMinBudgetSteps = 1000;

/// Seconds of a --time-budget: "30m", "1h", "1h30m", "90s", "45" (seconds). Throws naming the flag.
double parse_time_budget(const std::string& text);

/// The dotted keys a parsed config sets ("train", "train.tile", "data.resample.spacing"; a list
/// is one key).
std::set<std::string> config_file_keys(const ConfigFile& file);

/// The fingerprint of `c`'s data.dataset (relative to `config`), or of its data.pairs on their
/// training regions (the holdout left out). Throws naming the pair with polygon labels.
DatasetFingerprint fingerprint_run_data(const RunConfig& c, const std::string& config);

/// Fingerprints `c`'s data (paths relative to `config`), plans it, and sets every key the plan
/// decides that neither `file_keys` nor `flag_keys` holds. Throws tessera::Error naming the
/// config or the pair it cannot plan (polygon labels, a model.kind dsn).
AutoPlan apply_auto_plan(RunConfig& c, const std::string& config, const std::set<std::string>& file_keys,
                         const std::set<std::string>& flag_keys, const AutoRequest& request);

/// One choice as a line: "train.tile: 64 — why", and " [overridden: given by a flag]" when
/// the file or a flag won (config.yaml's head and the stderr report both print it).
std::string auto_choice_line(const AutoChoice& choice);

/// The choices as YAML comment lines ("# auto: train.tile: 64 — why"), for RUN/config.yaml.
std::string auto_choices_comment(const std::vector<AutoChoice>& choices);

}  // namespace tessera::engine
