// tessera train --config FILE.yaml [overrides]: train a U-Net on image/label pairs.
//
// The YAML mirrors the options structs (TrainOptions, UNetOptions); flags override it:
//   run_dir: runs/scene
//   model: {preset: unet-tiny, classes: 4}          # any UNetOptions field may follow
//   data:
//     pairs: [{image: scene.tif, labels: scene_labels.tif}]   # or labels: polygons.gpkg, label_attribute: class_id
//     class_names: [background, building, road, water]
//     holdout: {axis: x, fraction: 0.25}
//   train: {tile: 64, batch: 4, steps: 400, learning_rate: 0.002, seed: 1,
//           optimizer: adam, schedule: cosine, warmup_steps: 20, grad_clip: 1.0, accumulate: 1,
//           steps_per_epoch: 100, curriculum: [{epoch: 0, tile: 64}, {epoch: 2, tile: 128}],
//           keep_last: 3, early_stopping: 5, validate: true,
//           loss: {kind: dice_ce, include_background: true, class_weights: [...], focal_gamma: 2}}
//   parallel: {dp: 0, pp: 1, sp: 1, fusion_mib: 25, scale_learning_rate: false,     # optional
//              micro_batches: 0, schedule: 1f1b, activation_checkpoint: never}        # with pp > 1
//
// Under an MPI launcher (`mpirun -np P tessera train …`) the ranks form a ProcessGrid
// (default: all ranks on the data axis) and train data-parallel: `batch` is per replica,
// the global batch is batch × dp, and the result equals one process with the global batch.
// With --pp K each replica is a pipeline of K stages (parallel/pipeline_hooks.hpp), dp = P / K.
#include <filesystem>
#include <fstream>

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "commands.hpp"
#include "regions.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/process_memory.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/rasterize.hpp"
#include "tessera/parallel/data_parallel.hpp"
#include "tessera/parallel/pipeline.hpp"
#include "tessera/parallel/pipeline_hooks.hpp"
#include "tessera/parallel/device_monitor.hpp"
#include "tessera/parallel/process_grid.hpp"
#include "tessera/parallel/runtime.hpp"

namespace tessera::cli {
namespace {

struct Flags {
  std::string config, run_dir;
  std::optional<int64_t> steps, tile;
  std::optional<int> batch, threads;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  std::optional<int> dp, pp, sp, micro_batches;
  std::optional<std::string> schedule, checkpoint;
  std::optional<double> fusion_mib;
  std::optional<int64_t> warmup;
  std::string resume;
  bool scale_lr = false;
  bool no_progress = false;
};

template <class T>
void read_opt(const YAML::Node& n, const char* key, T& out, const std::string& where) {
  if (!n[key]) return;
  try {
    out = n[key].as<T>();
  } catch (const YAML::Exception& e) {
    throw Error(where + ": field '" + key + "' has the wrong type (" + e.msg + ")");
  }
}

UNetOptions model_from_yaml(const YAML::Node& m, const std::string& where) {
  std::string preset = "unet-tiny";
  read_opt(m, "preset", preset, where);
  UNetOptions o = unet_preset(preset);
  read_opt(m, "dims", o.dims, where);
  read_opt(m, "in_channels", o.in_channels, where);
  read_opt(m, "classes", o.classes, where);
  read_opt(m, "levels", o.levels, where);
  read_opt(m, "convs_per_level", o.convs_per_level, where);
  read_opt(m, "base_filters", o.base_filters, where);
  read_opt(m, "kernel", o.kernel, where);
  std::string s;
  if (m["padding"]) { read_opt(m, "padding", s, where); o.padding = parse_padding(s); }
  if (m["norm"]) { read_opt(m, "norm", s, where); o.norm = parse_norm(s); }
  if (m["decoder"]) { read_opt(m, "decoder", s, where); o.decoder = parse_decoder(s); }
  return o;
}

// train: section → TrainOptions (optimiser, schedule, loss, curriculum, checkpoints).
void read_train_options(const YAML::Node& tn, TrainOptions& t, const std::string& where) {
  read_opt(tn, "tile", t.tile, where);
  read_opt(tn, "batch", t.batch, where);
  read_opt(tn, "accumulate", t.accumulate, where);
  read_opt(tn, "steps", t.steps, where);
  read_opt(tn, "steps_per_epoch", t.steps_per_epoch, where);
  read_opt(tn, "seed", t.seed, where);
  read_opt(tn, "augment", t.augment, where);
  read_opt(tn, "sync_batch_norm", t.sync_batch_norm, where);
  read_opt(tn, "foreground_fraction", t.foreground_fraction, where);
  read_opt(tn, "checkpoint_every", t.checkpoint_every, where);
  read_opt(tn, "keep_last", t.keep_last, where);
  read_opt(tn, "early_stopping", t.early_stopping, where);
  read_opt(tn, "prefetch", t.prefetch, where);
  read_opt(tn, "channels_last", t.channels_last, where);
  read_opt(tn, "augment_rotate90", t.augmentation.rotate90, where);
  read_opt(tn, "augment_intensity_scale", t.augmentation.intensity_scale, where);
  read_opt(tn, "augment_intensity_shift", t.augmentation.intensity_shift, where);
  read_opt(tn, "augment_gaussian_noise", t.augmentation.gaussian_noise, where);
  read_opt(tn, "augment_uniform_noise", t.augmentation.uniform_noise, where);
  read_opt(tn, "grad_clip", t.grad_clip, where);
  read_opt(tn, "scale_learning_rate", t.scale_learning_rate, where);
  OptimizerOptions& o = t.optimizer;
  read_opt(tn, "learning_rate", o.learning_rate, where);
  read_opt(tn, "warmup_steps", o.warmup_steps, where);
  read_opt(tn, "momentum", o.momentum, where);
  read_opt(tn, "weight_decay", o.weight_decay, where);
  read_opt(tn, "step_size", o.step_size, where);
  read_opt(tn, "gamma", o.gamma, where);
  read_opt(tn, "power", o.power, where);
  read_opt(tn, "min_lr_fraction", o.min_lr_fraction, where);
  std::string name;
  if (tn["optimizer"]) { read_opt(tn, "optimizer", name, where); o.kind = parse_optimizer_kind(name); }
  if (tn["schedule"]) { read_opt(tn, "schedule", name, where); o.schedule = parse_schedule_kind(name); }
  if (const YAML::Node c = tn["curriculum"]) {
    if (!c.IsSequence()) throw Error(where + ": train.curriculum must be a list of {epoch, tile}");
    for (const auto& stage : c) {
      CurriculumStage cs;
      read_opt(stage, "epoch", cs.from_epoch, where);
      read_opt(stage, "tile", cs.tile, where);
      t.curriculum.push_back(cs);
    }
  }
  if (const YAML::Node l = tn["loss"]) {
    LossOptions& lo = t.loss;
    if (l["kind"]) { read_opt(l, "kind", name, where); lo.kind = parse_loss_kind(name); }
    read_opt(l, "dice_weight", lo.dice_weight, where);
    read_opt(l, "ce_weight", lo.ce_weight, where);
    read_opt(l, "focal_weight", lo.focal_weight, where);
    read_opt(l, "focal_gamma", lo.focal_gamma, where);
    read_opt(l, "smooth", lo.smooth, where);
    read_opt(l, "include_background", lo.include_background, where);
    read_opt(l, "class_weights", lo.class_weights, where);
  }
}

// Relative paths in a config are relative to the config file.
std::string resolve_path(const std::string& config, const std::string& p) {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(config).parent_path() / p).lexically_normal().string();
}

// Rank 0 prints peak memory and mean utilisation of every rank's device.
void print_telemetry_summary(parallel::Communicator& world, const parallel::DeviceMonitor& monitor) {
  const parallel::DeviceSummary s = monitor.summary();
  torch::Tensor mine = torch::tensor({double(s.peak_mem_used_bytes), s.mean_util_pct}, torch::kDouble);
  torch::Tensor all = world.allgather(mine);
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r)
    std::fprintf(stderr, "telemetry: rank %d %s peak memory %.1f MiB, mean utilisation %.0f%%\n", r, s.device.c_str(),
                 all[r][0].item<double>() / (1 << 20), all[r][1].item<double>());
}

void run(const Flags& f) {
  if (!std::filesystem::is_regular_file(f.config)) throw Error(f.config + ": no such config file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(f.config);
  } catch (const YAML::Exception& e) {
    throw Error(f.config + ": not valid YAML (line " + std::to_string(e.mark.line + 1) + ": " + e.msg + ")");
  }
  UNetOptions model = model_from_yaml(root["model"], f.config);
  TrainOptions t;
  read_opt(root, "run_dir", t.run_dir, f.config);
  t.run_dir = resolve_path(f.config, t.run_dir);
  const YAML::Node tn = root["train"];
  read_train_options(tn, t, f.config);
  parallel::GridShape shape;
  double fusion_mib = 25;
  int micro_batches = 0;
  std::string schedule = "1f1b", checkpoint = "never";
  if (const YAML::Node pn = root["parallel"]) {
    read_opt(pn, "activation_checkpoint", checkpoint, f.config);
    read_opt(pn, "micro_batches", micro_batches, f.config);
    read_opt(pn, "schedule", schedule, f.config);
    read_opt(pn, "dp", shape.data, f.config);
    read_opt(pn, "pp", shape.pipeline, f.config);
    read_opt(pn, "sp", shape.spatial, f.config);
    read_opt(pn, "fusion_mib", fusion_mib, f.config);
    read_opt(pn, "scale_learning_rate", t.scale_learning_rate, f.config);
  }
  if (f.dp) shape.data = *f.dp;
  if (f.pp) shape.pipeline = *f.pp;
  if (f.sp) shape.spatial = *f.sp;
  if (f.fusion_mib) fusion_mib = *f.fusion_mib;
  if (f.micro_batches) micro_batches = *f.micro_batches;
  if (f.schedule) schedule = *f.schedule;
  if (f.checkpoint) checkpoint = *f.checkpoint;
  if (f.scale_lr) t.scale_learning_rate = true;
  if (f.warmup) t.optimizer.warmup_steps = *f.warmup;
  if (!f.run_dir.empty()) t.run_dir = f.run_dir;
  if (f.steps) t.steps = *f.steps;
  if (f.tile) t.tile = *f.tile;
  if (f.batch) t.batch = *f.batch;
  if (f.lr) t.optimizer.learning_rate = *f.lr;
  if (f.seed) t.seed = *f.seed;
  t.progress = !f.no_progress;

  const YAML::Node dn = root["data"];
  if (!dn || !dn["pairs"] || !dn["pairs"].IsSequence() || dn["pairs"].size() == 0)
    throw Error(f.config + ": data.pairs must list at least one {image, labels} pair");
  Holdout holdout;
  if (dn["holdout"]) {
    read_opt(dn["holdout"], "axis", holdout.axis, f.config);
    read_opt(dn["holdout"], "fraction", holdout.fraction, f.config);
  }
  CheckpointMeta meta;
  read_opt(dn, "class_names", meta.class_names, f.config);

  std::vector<std::unique_ptr<ImageSource>> images, labels;
  std::vector<TrainingPair> pairs, validation;
  bool validate = true;
  read_opt(tn, "validate", validate, f.config);
  for (const auto& p : dn["pairs"]) {
    if (!p["image"] || !p["labels"]) throw Error(f.config + ": every data.pairs entry needs image and labels");
    images.push_back(io::open_image(resolve_path(f.config, p["image"].as<std::string>())));
    std::string label_path = resolve_path(f.config, p["labels"].as<std::string>());
    if (io::is_vector_path(label_path)) {
      // Polygons: burnt onto the image's grid once, kept in the run directory.
      io::RasterizeOptions ro;
      read_opt(p, "label_attribute", ro.attribute, f.config);
      read_opt(p, "label_layer", ro.layer, f.config);
      const std::filesystem::path burnt = std::filesystem::path(t.run_dir) / "labels" /
                                          (std::filesystem::path(label_path).stem().string() + "-" + ro.attribute + ".tif");
      std::filesystem::create_directories(burnt.parent_path());
      io::rasterize_polygons(label_path, images.back()->info().path, burnt.string(), ro);
      label_path = burnt.string();
    }
    labels.push_back(io::open_image(label_path));
    holdout.validate(static_cast<int>(images.back()->info().extent.size()));
    if (images.back()->info().extent != labels.back()->info().extent)
      throw Error(labels.back()->info().path + ": label size " + to_string(labels.back()->info().extent) +
                  " differs from image size " + to_string(images.back()->info().extent) + " of " +
                  images.back()->info().path);
    pairs.push_back({images.back().get(), labels.back().get(),
                     training_region(images.back()->info().extent, holdout)});
    if (validate && holdout.fraction > 0)
      validation.push_back({images.back().get(), labels.back().get(),
                            holdout_region(images.back()->info().extent, holdout)});
  }
  if (!root["model"]["in_channels"]) model.in_channels = images.front()->info().channels;
  model.dims = static_cast<int>(images.front()->info().extent.size());
  if (meta.class_names.empty())
    for (int c = 0; c < model.classes; ++c) meta.class_names.push_back("class " + std::to_string(c));
  if (static_cast<int>(meta.class_names.size()) != model.classes)
    throw Error(f.config + ": data.class_names has " + std::to_string(meta.class_names.size()) +
                " names but model.classes is " + std::to_string(model.classes));
  model.validate();
  meta.model = model;
  meta.norm = io::default_normalization(*images.front());

  parallel::Communicator& world = parallel::world();
  parallel::ProcessGrid grid(world, shape);
  if (grid.shape().spatial != 1) throw Error("--sp: spatial parallel training is not available yet; use --dp and --pp");
  if (micro_batches < 0 || micro_batches > t.batch)
    throw Error(f.config + ": parallel.micro_batches: " + std::to_string(micro_batches) + " must be in 0 … batch (" +
                std::to_string(t.batch) + "; 0: one tile per micro-batch)");
  if (grid.shape().pipeline > 1) {  // what the pipeline refuses, refused before the run starts
    const LayerSequence seq = unet_layer_sequence(model, t.tile + unet_remainder(model) + 2 * unet_halo(model));
    if (seq.size() < grid.shape().pipeline)
      throw Error("--pp: " + std::to_string(grid.shape().pipeline) + " stages for a model of " +
                  std::to_string(seq.size()) + " layers");
    try {
      parallel::PipelineOptions(parallel::balance_naive(seq.size(), grid.shape().pipeline).sizes)
          .with_micro_batches(std::max(1, micro_batches))
          .with_loss(t.loss)
          .validate(seq);
    } catch (const Error& e) {
      throw Error(f.config + ": " + e.what() + " (pipeline training, --pp " + std::to_string(grid.shape().pipeline) + ")");
    }
  }
  // Pipeline stages run forward and backward through PipelineTrainHooks; one stage is plain
  // data parallelism.
  std::unique_ptr<TrainHooks> hooks;
  std::function<void(std::function<void(int64_t, double)>)> set_step_callback;
  parallel::PipelineTrainHooks* pipeline_hooks = nullptr;  // for per-stage telemetry
  if (grid.shape().pipeline > 1) {
    auto h = std::make_unique<parallel::PipelineTrainHooks>(
        grid.pipeline(), grid.data(),
        parallel::PipelineHookOptions()
            .with_micro_batches(micro_batches)
            .with_schedule(parallel::parse_pipeline_schedule(schedule))
            .with_checkpoint(parallel::parse_activation_checkpoint(checkpoint))
            .with_writes_outputs(grid.is_root()));
    set_step_callback = [p = h.get()](auto fn) { p->set_step_callback(std::move(fn)); };
    pipeline_hooks = h.get();
    hooks = std::move(h);
  } else {
    auto h = std::make_unique<parallel::DataParallelHooks>(grid.data(), parallel::DataParallelOptions()
                                                                           .with_fusion_bytes(int64_t(fusion_mib * (1 << 20)))
                                                                           .with_writes_outputs(grid.is_root()));
    set_step_callback = [p = h.get()](auto fn) { p->set_step_callback(std::move(fn)); };
    hooks = std::move(h);
  }
  const bool root_rank = grid.is_root();

  if (!f.resume.empty()) {
    t.resume = f.resume == "auto" ? (std::filesystem::path(t.run_dir) / "checkpoints" / "last.pt").string() : f.resume;
    if (root_rank) std::fprintf(stderr, "train: resuming from %s\n", t.resume.c_str());
  }
  const int threads = configure_threads(f.threads.value_or(0));
  torch::manual_seed(t.seed);
  UNet net(model);
  if (root_rank) {
    std::filesystem::create_directories(t.run_dir);
    std::ofstream resolved(std::filesystem::path(t.run_dir) / "config.yaml");
    YAML::Node out = root;
    out["run_dir"] = t.run_dir;
    out["train"]["tile"] = t.tile;
    out["train"]["batch"] = t.batch;
    out["train"]["steps"] = t.steps;
    out["train"]["learning_rate"] = t.optimizer.learning_rate;
    out["train"]["seed"] = t.seed;
    out["train"]["scale_learning_rate"] = t.scale_learning_rate;
    out["train"]["warmup_steps"] = t.optimizer.warmup_steps;
    out["train"]["optimizer"] = to_string(t.optimizer.kind);
    out["train"]["schedule"] = to_string(t.optimizer.schedule);
    out["parallel"]["dp"] = grid.shape().data;
    out["parallel"]["pp"] = grid.shape().pipeline;
    out["parallel"]["sp"] = grid.shape().spatial;
    out["parallel"]["fusion_mib"] = fusion_mib;
    if (grid.shape().pipeline > 1) {
      out["parallel"]["micro_batches"] = micro_batches;
      out["parallel"]["schedule"] = schedule;
      out["parallel"]["activation_checkpoint"] = checkpoint;
    }
    resolved << out << '\n';
  }
  if (root_rank)
    std::fprintf(stderr, "train: %d-D U-Net L=%d f=%d, %lld parameters, halo %lld, tiles %lld+%lld (input %lld), %d threads, %s, global batch %lld\n",
                 model.dims, model.levels, model.base_filters, (long long)unet_parameter_count(model),
                 (long long)unet_halo(model), (long long)t.tile, (long long)unet_remainder(model),
                 (long long)(t.tile + unet_remainder(model) + 2 * unet_halo(model)), threads,
                 grid.describe().c_str(), (long long)t.batch * grid.shape().data);
  parallel::DeviceMonitorOptions mo;
  mo.run_dir = t.run_dir;
  mo.rank = world.rank();
  mo.device = parallel::select_device(parallel::launch_info(), torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0);
  parallel::DeviceMonitor monitor(mo);
  monitor.set_phase("train");
  set_step_callback([&](int64_t step, double) {
    monitor.set_step(step);
    monitor.set_tiles_done(step * t.batch);
    if (pipeline_hooks && pipeline_hooks->last_step()) {
      const parallel::PipelineStepStats& st = *pipeline_hooks->last_step();
      monitor.set_pipeline_stage({pipeline_hooks->stage_index(), st.seconds, st.compute_seconds, st.bytes_sent,
                                  st.bytes_received, peak_resident_bytes()});
    }
  });
  const TrainReport r = train(net, pairs, t, meta, hooks.get(), validation);
  monitor.set_phase("done");
  monitor.sample_now();
  print_telemetry_summary(world, monitor);
  if (!root_rank) return;
  std::printf("trained %lld steps in %.1f s (%.1f tiles/s), final loss %.4f%s\ncheckpoint: %s\n", (long long)r.steps,
              r.seconds, r.tiles_per_second, r.final_loss, r.stopped_early ? " (stopped early)" : "",
              r.checkpoint.c_str());
  if (r.best_validation >= 0)
    std::printf("best validation mean Dice %.4f: %s\n", r.best_validation, r.best_checkpoint.c_str());
}

}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a U-Net from a YAML config (flags override the file)");
  static Flags f;
  cmd->add_option("--config", f.config, "YAML file: run_dir, model, data (pairs, class_names, holdout), train")
      ->required();
  cmd->add_option("--run-dir", f.run_dir, "Where metrics.jsonl, config.yaml and checkpoints/ go");
  cmd->add_option("--steps", f.steps, "Optimiser steps");
  cmd->add_option("--tile", f.tile, "Training tile inset side (multiple of 2^(L-1))");
  cmd->add_option("--batch", f.batch, "Tiles per step and data-parallel replica");
  cmd->add_option("--lr", f.lr, "Peak learning rate");
  cmd->add_option("--seed", f.seed, "Seed for initialisation, tiles and augmentation");
  cmd->add_option("--threads", f.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_option("--dp", f.dp, "Data-parallel replicas (default: ranks / (pp x sp))");
  cmd->add_option("--pp", f.pp, "Pipeline stages: the U-Net cut into this many stages by the memory-aware balance");
  cmd->add_option("--micro-batches", f.micro_batches, "Micro-batches per replica batch with --pp (default: one tile each)");
  cmd->add_option("--schedule", f.schedule, "Pipeline schedule with --pp: 1f1b (default) or gpipe");
  cmd->add_option("--activation-checkpoint", f.checkpoint,
                  "Activation checkpointing with --pp: never (default), always, except_last (recompute, same result)");
  cmd->add_option("--sp", f.sp, "Spatial ranks per tile (1 until spatial parallelism arrives)");
  cmd->add_option("--fusion-mib", f.fusion_mib, "Gradient allreduce bucket bound in MiB (default 25)");
  cmd->add_flag("--scale-lr", f.scale_lr, "Multiply the learning rate by the replicas (default off: exact equivalence)");
  cmd->add_option("--warmup-steps", f.warmup, "Linear learning-rate warm-up over this many steps (default 0)");
  cmd->add_option("--resume", f.resume,
                  "Continue a killed run from a checkpoint (`auto` = RUN/checkpoints/last.pt); the losses after it equal "
                  "an uninterrupted run's");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
