// tessera train --config FILE.yaml [overrides]: train a U-Net on image/label pairs.
// tessera train --auto [--time-budget 30m] --dataset DIR [--fold all]: the dataset's plan
// (tessera/engine/auto_train.hpp), one run or one per fold (engine::run_train_command).
//
// The YAML mirrors the options structs (TrainOptions, UNetOptions); flags override it. Its
// keys are declared once, in tessera/engine/run_config.hpp (fields(RunConfig&)), which drives reading,
// the resolved RUN/config.yaml (every field) and the flags that set config keys:
//   run_dir: runs/scene
//   model: {preset: unet-tiny, classes: 4}          # any UNetOptions field may follow
//   data:
//     pairs: [{image: scene.tif, labels: scene_labels.tif}]   # or labels: polygons.gpkg, label_attribute: class_id
//     class_names: [background, building, road, water]
//     holdout: {axis: x, fraction: 0.25}
//   data: {dataset: Task03_Liver, validation: [liver_007]}  # or: an MSD / nnU-Net folder (msd_dataset.hpp),
//                                                           # validation: [ids] | fold: K, folds: N
//   train: {tile: 64, batch: 4, steps: 400, learning_rate: 0.002, seed: 1,
//           optimizer: adam, schedule: cosine, warmup_steps: 20, grad_clip: 1.0, accumulate: 1,
//           steps_per_epoch: 100, curriculum: [{epoch: 0, tile: 64}, {epoch: 2, tile: 128}],
//           keep_last: 3, early_stopping: 5, validate: true,
//           loss: {kind: dice_ce, include_background: true, class_weights: [...], focal_gamma: 2}}
//   parallel: {dp: 0, pp: 1, sp: 1, fusion_mib: 25, scale_learning_rate: false,     # optional
//              micro_batches: 0, schedule: 1f1b, activation_checkpoint: never,        # with pp > 1
//              sp_mesh: 2x2}                                                          # with sp > 1
// A key this file does not read is an error naming the file, line and closest known key
// (tessera/engine/config_file.hpp); so is a value of the wrong type. The work is engine::TrainJob.
//
// Under an MPI launcher (`mpirun -np P tessera train …`) the ranks form a ProcessGrid
// (default: all ranks on the data axis) and train data-parallel: `batch` is per replica,
// the global batch is batch × dp, and the result equals one process with the global batch.
// With --pp K each replica is a pipeline of K stages (parallel/pipeline_hooks.hpp), dp = P / K.
// With --sp S each tile of a replica is split into S blocks, one per rank, along the first
// axis or as --sp-mesh says (2x2; parallel/spatial_hooks.hpp), dp = P / S; `same` padding only.
#include <set>

#include "commands.hpp"
#include "options_cli.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"

namespace tessera::cli {
namespace {

// The flags that are not config keys; the others are `overrides` (train_flags()).
struct Flags {
  engine::TrainRequest request;
  engine::TrainCommandLine line;
  bool no_progress = false;
  FlagOverrides<engine::RunConfig> overrides;
};

// The file (or --dataset), then the flags over it, --auto's plan under both.
void run(const Flags& f) {
  std::set<std::string> flag_keys;
  for (const auto& [key, value] : f.overrides.given_all()) flag_keys.insert(key);
  const auto apply_flags = [&](engine::RunConfig& c) {
    f.overrides.apply(c);
    c.train.progress = !f.no_progress;
  };
  engine::run_train_command(f.line, f.request, apply_flags, flag_keys);
}

void add_auto_flags(CLI::App* cmd, engine::TrainCommandLine& l) {
  cmd->add_flag("--auto", l.auto_plan,
                "Train the dataset's plan (tessera plan --dataset): every key it decides that the file and the flags leave "
                "unset; RUN/config.yaml says what was chosen and why");
  cmd->add_option("--time-budget", l.time_budget, "With --auto: train.steps from a measured step time (30m, 1h, 90s)");
  cmd->add_option("--device-memory", l.device_memory_gib, "With --auto: GiB per device the plan sizes to (default: this machine)");
  cmd->add_option("--dataset", l.dataset, "An MSD / nnU-Net folder to train on without a config file (data.dataset)");
  cmd->add_option("--fold", l.fold, "Validate on fold K of data.folds, or `all`: one run per fold in RUN/fold-K and a summary, or `none`: no "
                  "validation cases (--auto on a dataset of 5 or more cases validates on fold 0 of 5 by default)");
  cmd->add_option("--folds", l.folds, "Folds for --fold (default data.folds, else 5)");
}

}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a U-Net from a YAML config (flags override the file)");
  static Flags f;
  cmd->add_option("--config", f.request.config,
                  "YAML file (or --dataset DIR): run_dir, model, data (pairs, class_names, holdout; or dataset: an MSD / nnU-Net folder with "
                  "validation: [case ids] or fold: K, folds: N = every N-th case by id from the K-th), train")
;
  add_auto_flags(cmd, f.line);
  std::vector<FlagOverrides<engine::RunConfig>::Flag> flags;
  for (const engine::TrainFlag& flag : engine::train_flags()) flags.push_back({flag.key, flag.aliases});
  f.overrides.add_to(cmd, flags);
  cmd->add_option("--threads", f.request.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_option("--resume", f.request.resume,
                  "Continue a killed run from a checkpoint (`auto` = RUN/checkpoints/last.pt); the losses after it equal "
                  "an uninterrupted run's");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->add_option("--profile", f.request.profile,
                  "Write rank 0's operators (forward, backward, optimizer) as a Chrome trace JSON; "
                  "scripts/profile_summary.py FILE prints where the time went");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
