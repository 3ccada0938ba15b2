#pragma once
// The parts of a TrainJob (tessera/engine/train_job.hpp), one file each: the dataset
// (dataset.cpp), the parallel layout and its checks (layout.cpp), what rank 0 prints and the
// telemetry (reports.cpp), the Domain Separation Network's run (dsn.cpp). Internal to engine.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/spatial_mesh.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/modes/data_parallel.hpp"
#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/modes/domain_hooks.hpp"
#include "tessera/parallel/modes/pipeline_hooks.hpp"
#include "tessera/parallel/modes/spatial_hooks.hpp"

namespace tessera::engine::train {

// ---- dataset.cpp --------------------------------------------------------------------------

struct Dataset {
  std::vector<std::unique_ptr<ImageSource>> images, labels;  // as opened, and resampled copies
  std::vector<TrainingPair> pairs, validation;
  std::map<const ImageSource*, Normalization> image_norms;   // per-image kinds (mr), by image
  VolumeResampling resampling;
  std::string modality;  // "CT", "MR", a dataset's channel name, or ""
  std::vector<std::string> notes;  // what preprocessing chose, printed with the plan (root rank)
  std::vector<MsdCase> validation_cases;  // data.dataset's validation cases as files (`validation`'s order)
};

/// data.pairs: every pair opened (polygon labels burnt onto the image grid), placed on the
/// network's grid, its holdout cut off (validation when train.validate).
Dataset open_pairs(const RunConfig& c, const std::string& config);
/// data.dataset: its training cases as pairs, its validation cases (data.validation, or fold
/// K of N) as whole-image validation pairs; takes its label names and channel.
Dataset open_dataset(RunConfig& c, const std::string& config);
/// The model as the data makes it (channels, dimensions) and the description every
/// checkpoint carries (class names, normalisation with its statistics, resampling).
CheckpointMeta describe_model(RunConfig& c, Dataset& data, const std::string& config);

// ---- layout.cpp ---------------------------------------------------------------------------

/// One micro-batch's full-resolution feature map in bytes at the run's tile and batch
/// (tessera::level0_bytes, cpu_tensor_cache.hpp).
inline int64_t level0_bytes(const TrainOptions& t, const UNetOptions& m) {
  return tessera::level0_bytes(t.batch, m.base_filters, m.dims, t.tile);
}
/// The grid the flags ask for; combinations the trainer cannot run are refused.
parallel::GridShape grid_shape(const ParallelConfig& p);
/// The blocks of every tile with --sp `spatial`: --sp-mesh, or that many along the first axis.
SpatialMesh spatial_mesh(const ParallelConfig& p, int spatial, int dims);
/// What the parallel modes refuse (spatial tiles and meshes, gradient compression outside
/// data parallelism, micro-batches, pipeline stages), refused before the run starts.
void check_parallel(const RunConfig& c, const parallel::ProcessGrid& grid, const std::string& config);
/// parallel.gradient_compression → the format gradients travel in.
Precision gradient_wire(const std::string& s);

// Pipeline stages and spatial blocks run forward and backward through their hooks; one
// stage of one block is plain data parallelism; a DSN's hooks place its domains on the
// grid's domain axis (with replicas and blocks inside each group).
struct Hooks {
  std::unique_ptr<TrainHooks> hooks;
  std::function<void(std::function<void(int64_t, double)>)> set_step_callback;
  parallel::PipelineTrainHooks* pipeline = nullptr;  // for per-stage telemetry
  parallel::SpatialTrainHooks* spatial = nullptr;    // for the halo bytes in the report
  parallel::DataParallelHooks* data = nullptr;       // for the communication timeline in the report
  parallel::DomainTrainHooks* domain = nullptr;      // a DSN's (bind the network before training)
  TrainHooks* get() const { return hooks.get(); }
};
/// The hooks of the grid's modes; for model.kind dsn of `domains` domains, its domain hooks.
Hooks make_hooks(const RunConfig& c, parallel::ProcessGrid& grid, int domains = 1);
/// RUN/config.yaml: every field as this run uses it (the grid as resolved, data paths absolute:
/// absolute_data_paths, read relative to `config`), written staged.
/// `head` (comment lines, e.g. --auto's choices) goes above the keys.
void write_resolved_config(RunConfig c, const parallel::ProcessGrid& grid, const std::string& config,
                           const std::string& head = "");

// ---- reports.cpp --------------------------------------------------------------------------

/// "train: 2-D U-Net L=4 f=16, … global batch 8" (stderr).
void print_plan(const RunConfig& c, const parallel::ProcessGrid& grid, const Hooks& hooks, int threads, UNet& net);
/// This rank's device monitor in the phase "train", following the hooks' steps.
std::unique_ptr<parallel::DeviceMonitor> start_monitor(const TrainOptions& t, const Hooks& hooks);
/// The planner's peak resident memory for one rank of this run on top of `baseline` (the rank's
/// resident memory before training): grid_plan.hpp's layout_rank_bytes for the grid's stages,
/// spatial mesh, schedule and checkpointing, one tile per micro-batch. 0 where the planner has
/// no model of the run (a registry model: its layer sequence is not the U-Net's).
int64_t predicted_rank_bytes(const RunConfig& c, const parallel::ProcessGrid& grid, int64_t baseline);
/// Collective: rank 0 prints each rank's peak memory and mean utilisation; on CPU ranks with
/// a prediction (`predicted` > 0, this rank's), the peak beside it.
void print_telemetry_summary(parallel::Communicator& world, const parallel::DeviceMonitor& monitor,
                             int64_t predicted = 0);
/// Rank 0's gradient-communication timeline of a data-parallel run.
void print_communication(const parallel::DataParallelHooks& h);
/// Rank 0's halo bytes per step with --sp.
void print_halo_exchange(const parallel::SpatialTrainHooks& h, int64_t steps);
void print_report(const TrainReport& r);

// ---- train_job.cpp ------------------------------------------------------------------------

/// --resume PATH, or `auto`: RUN/checkpoints/last.pt, or when it is damaged the newest intact
/// step-NNNNNN.pt (said on stderr when `say`); refused when there is none.
std::string resume_checkpoint(const std::string& resume, const std::string& run_dir, bool say);

// ---- time_budget.cpp ----------------------------------------------------------------------

/// --time-budget: a few steps of this run on a throwaway network of `model` (same seed, tiles
/// and options) timed, then t.steps = what fits the budget left after `spent_s` seconds, with
/// room for validation and checkpoints. Returns the choice with its figures.
/// --time-budget with --auto: the step's shape (tile, levels, filters, batch; the keys the plan
/// set) fitted to the budget (auto_train.hpp fit_step_shape) on a rate measured over a few
/// steps of the smallest shape; `c` and `meta.model` take the shape, `choices` say so. Returns
/// the added choice (none when the file and flags fix every shape key).
std::vector<AutoChoice> shape_to_budget(RunConfig& c, std::vector<AutoChoice>& choices, const Index& median_shape,
                                        const Dataset& data, CheckpointMeta& meta, double budget_s, double spent_s);
AutoChoice budget_steps(TrainOptions& t, const UNetOptions& model, const Dataset& data, const CheckpointMeta& meta,
                        double budget_s, double spent_s, double reserve_s = 0);

// ---- validation.cpp -----------------------------------------------------------------------

/// Whether the run ends by inferring data.dataset's validation cases and deciding the
/// post-processing on them: --auto with validation cases, one process.
bool decides_postprocessing(const TrainRequest& request, const Dataset& data);
/// The predicted seconds of that inference: the Gaussian windows of every validation case on
/// the network's grid (c's tile, overlap 1/2) × one window's forward, timed now on a throwaway
/// network of c's model, × kValidationOverhead. `why` says so.
double validation_seconds(const RunConfig& c, const Dataset& data, std::string& why);
/// The run's validation cases inferred as `tessera infer` does by default (RUN/checkpoints/
/// last.pt, no post-processing) into RUN/validation/, the post-processing decided on them
/// (postprocessing.hpp), RUN/postprocessing.json; all committed together (output_set.hpp).
/// Prints the decision (stderr). Throws tessera::Error naming the case.
void decide_on_validation(const RunConfig& c, const TrainRequest& request, const std::vector<MsdCase>& cases);

// ---- dsn.cpp ------------------------------------------------------------------------------

/// model.kind dsn: domain parallel over parallel::world().
void run_dsn(const TrainRequest& request, RunConfig& c);

}  // namespace tessera::engine::train
