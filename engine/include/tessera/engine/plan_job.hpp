#pragma once
// `tessera plan` as a library: the layout for a model, an image and a set of devices — tile
// inset and tiling, pipeline stages with their balance or spatial parallelism (a tile split
// over sp ranks, `same` padding), micro-batches, data-parallel degree, predicted memory and
// time, and which limit binds (the search: parallel/plan/plan.hpp). Times and memory come from
// the calibration file when it holds this model (calibration.hpp), or with `cluster` from a
// cluster description (its device's memory, sustained FLOP/s = FP32 peak × e_max, memory
// bandwidth, network); with `simulate` the chosen layout also runs through the discrete-event
// simulator on that cluster, and the report says why the two step times differ.
//
// calibrate_model(): `plan --calibrate` times forward + backward of the network on this
// machine (LibTorch, one tile), stores the sustained FLOP/s per model in the calibration file,
// then measures every layer's memory beyond the stage model at two tile insets (half the
// calibration tile and the whole) and stores the per-layer fit (LayerMemoryCalibration) and
// the layer times, which later plans and `tessera bench pipeline` use. Torch-free header.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/engine/plan_options.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/grid_plan.hpp"
#include "tessera/parallel/plan/plan.hpp"

namespace tessera::engine {

/// A plan and where its figures come from (said beside them).
struct PlanResult {
  parallel::PlanOptions options;  ///< what the planner was asked, calibration included
  parallel::Layout layout;
  std::string time_source = "default CPU figure";
  std::string memory_source;
  std::string machine;        ///< with `cluster`: the device and network priced, one line; else empty
  std::optional<parallel::ClusterModel> cluster;  ///< with `cluster`: the cluster priced
  nlohmann::json simulation;  ///< with `simulate`: simulation_json() plus cluster, file; else null
  /// Training: the process grid's combinations domains × dp × pp × sp (grid_plan.hpp), each
  /// (pp, sp) with its verdict; unset for inference or when no combination fits.
  std::optional<parallel::GridPlan> grid;
};

/// Plans (and simulates with `simulate`). Notes on stderr (a registry model's approximation,
/// an unused calibration). Throws tessera::Error naming the flag or the file.
PlanResult plan_layout(const PlanJobOptions& o);

/// What `plan --json` prints.
nlohmann::json plan_json(const PlanJobOptions& o, const PlanResult& r);

/// The FLOP-weighted efficiency the simulator reaches on `cluster`'s device at the layout's tile
/// (FLOPs of a tile's forward, and backward when `training`, over the simulator's per-layer
/// seconds × the fp32 peak: measured convolution kernels, memory-bound layers, launches), where
/// the plan prices every layer at e_max.
double layer_efficiency(const parallel::Layout& layout, const UNetOptions& model, const parallel::ClusterModel& cluster,
                        bool training);

/// What `plan` prints: the layout, the simulation when there is one, the reasons.
void print_plan(const PlanJobOptions& o, const PlanResult& r);

/// `plan --calibrate`: measures and stores; prints what it measured and where it stored it.
void calibrate_model(const PlanJobOptions& o);

/// The command: validate(), then calibrate_model(), or plan_layout() printed as text or JSON.
void run_plan(const PlanJobOptions& o);
/// --dataset: the fingerprint and training plan (dataset_plan.hpp) printed, or as JSON.
void plan_dataset(const PlanJobOptions& o);

}  // namespace tessera::engine
