#pragma once
// The calibration file `tessera plan --calibrate` writes and `tessera plan` / `tessera bench
// pipeline` read (default ~/.cache/tessera/calibration.json):
//   {"models": {"unet-small": {"device_flops": …, "input_side": …, "seconds_per_step": …,
//      "threads": …, "dims": …, "model": {the UNetOptions measured, as in checkpoints},
//      "memory": {"sides": [a, b], "threads": …, "constant_bytes": [one per layer],
//                 "bytes_per_element": [one per layer]},
//      "time": {"side": b, "seconds": [one per layer], "seconds_per_unit": [one per layer]}}, …}}
// Torch-free.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/core/unet_spec.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::engine {

/// `given`, or ~/.cache/tessera/calibration.json when empty.
std::filesystem::path calibration_path(const std::string& given);

/// The file's JSON; an empty object when it does not exist. Throws tessera::Error naming the
/// file when it is not JSON.
nlohmann::json read_calibration(const std::filesystem::path& path);

/// Writes under a temporary name and renames, so a failed write leaves the old file whole.
void write_calibration(const std::filesystem::path& path, const nlohmann::json& j);

struct ModelCalibration {
  std::string other_options;  ///< non-empty: an entry exists but was measured on other options (why it is unused)
  std::optional<double> device_flops;
  parallel::LayerMemoryCalibration memory;  ///< empty when not measured
  parallel::LayerTimeCalibration time;      ///< empty when not measured
};

/// What `j` holds for `preset` measured on exactly `options` (fields absent when not
/// calibrated, or when the entry was measured with other options, e.g. `--filters`:
/// other_options says so). Throws tessera::Error naming `path` when an entry is malformed.
ModelCalibration model_calibration(const nlohmann::json& j, const std::filesystem::path& path, const std::string& preset,
                                   const UNetOptions& options);

/// A cluster description for the simulator with this machine's measurements filled in: when
/// its device's throughput is "calibrated", `cal`'s FLOP/s (else the file's fallback, said on
/// stderr) and `cal`'s measured layer times (empty when none: the device model is used).
struct CalibratedCluster {
  parallel::ClusterModel cluster;
  parallel::LayerTimeCalibration times;
};
CalibratedCluster load_calibrated_cluster(const std::string& cluster_path, const ModelCalibration& cal,
                                          const std::string& preset, const std::filesystem::path& calibration);

}  // namespace tessera::engine
