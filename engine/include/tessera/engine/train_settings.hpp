#pragma once
// Every setting of a `tessera train` config is honoured by the path the run takes, or refused
// in one line naming it: one table, per training mode, of the keys that mode does not honour
// (with why), checked before any image is read. A key set to its default is never refused;
// a key the table leaves out for a mode is honoured there — tests/engine/settings_walk_test.cpp
// walks every key of the resolved config through every mode and checks both halves (a refused
// key stops the run naming it; any other key changes what the run writes, or is one of the
// few the test lists as exact by design). Torch-free.
#include <string>
#include <vector>

#include "tessera/engine/run_config.hpp"

namespace tessera::engine {

/// The path a training run takes: data parallel (one process included), pipeline stages
/// (parallel.pp > 1), spatial blocks (parallel.sp > 1) or a Domain Separation Network
/// (model.kind dsn, domain parallel).
enum class TrainMode { kData, kPipeline, kSpatial, kDomain };

/// "data parallel", "pipeline (parallel.pp > 1)", …: as the refusals name the mode.
std::string describe(TrainMode mode);
/// The mode `c` runs in.
TrainMode train_mode(const RunConfig& c);

struct RefusedSetting {
  std::string key;  ///< dotted config key ("parallel.fusion_mib"); ending in '.': every key below it
  std::string why;  ///< what the mode does instead, and what to do
};

/// The keys `mode` refuses when they hold anything but their default.
const std::vector<RefusedSetting>& refused_settings(TrainMode mode);
/// The keys `c` refuses: its mode's, and those of another data source (data.validation,
/// data.fold and data.folds without data.dataset: the reader refuses them).
std::vector<RefusedSetting> refused_settings(const RunConfig& c);

/// The keys a run on rasters refuses whatever its mode: data.resample (resampling is for
/// volumes), checked once the images are open (preprocessing.cpp choose_resampling).
const std::vector<RefusedSetting>& refused_for_rasters();

/// Throws tessera::Error "CONFIG: KEY VALUE: not honoured by MODE: WHY" for the first key of
/// refused_settings(train_mode(c)) that `c` sets to another value than the default.
void refuse_unhonoured_settings(const RunConfig& c, const std::string& config);

/// Every declared key of `c` with its value as the resolved config.yaml writes it (a
/// sequence in flow style, "[a, b]"), by dotted key.
std::vector<std::pair<std::string, std::string>> setting_values(const RunConfig& c);

}  // namespace tessera::engine
