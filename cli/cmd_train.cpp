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
// A key this file does not read is an error naming the file, line and closest known key
// (config_file.hpp); so is a value of the wrong type.
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
#include "config_file.hpp"
#include "regions.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/process_memory.hpp"
#include "tessera/core/run_layout.hpp"
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

// A pair as the config names it; opened (and polygons burnt) after the whole file is read.
struct PairConfig {
  std::string image, labels;
  io::RasterizeOptions rasterize;
  std::string where, prefix;  // "FILE:LINE" and "data.pairs[i].", for messages
};

// Everything a config file says. Reading it in one pass is also what makes each key known
// to ConfigFile::reject_unknown_keys (config_file.hpp): read every key unconditionally.
struct RunConfig {
  UNetOptions model;
  bool in_channels_given = false;
  TrainOptions train;
  bool validate = true;
  Holdout holdout;
  std::vector<std::string> class_names;
  std::vector<PairConfig> pairs;
  std::string pairs_where;  // "FILE:LINE" of data.pairs (or of the file)
  parallel::GridShape shape;
  double fusion_mib = 25;
  int micro_batches = 0;
  std::string schedule = "1f1b", checkpoint = "never";
};

// model: section → UNetOptions: a preset, then any field overridden.
UNetOptions read_model(const ConfigSection& m, bool& in_channels_given) {
  UNetOptions o = unet_preset("unet-tiny");
  m.read_as("preset", o, [](const std::string& name) { return unet_preset(name); });
  m.read("dims", o.dims);
  in_channels_given = m.read("in_channels", o.in_channels);
  m.read("classes", o.classes);
  m.read("levels", o.levels);
  m.read("convs_per_level", o.convs_per_level);
  m.read("base_filters", o.base_filters);
  m.read("kernel", o.kernel);
  m.read_as("padding", o.padding, parse_padding);
  m.read_as("norm", o.norm, parse_norm);
  m.read_as("decoder", o.decoder, parse_decoder);
  return o;
}

void read_loss(const ConfigSection& l, LossOptions& lo) {
  l.read_as("kind", lo.kind, parse_loss_kind);
  l.read("dice_weight", lo.dice_weight);
  l.read("ce_weight", lo.ce_weight);
  l.read("focal_weight", lo.focal_weight);
  l.read("focal_gamma", lo.focal_gamma);
  l.read("smooth", lo.smooth);
  l.read("include_background", lo.include_background);
  l.read("class_weights", lo.class_weights);
}

// train: section → TrainOptions (optimiser, schedule, loss, curriculum, checkpoints).
void read_train_options(const ConfigSection& tn, TrainOptions& t) {
  tn.read("tile", t.tile);
  tn.read("batch", t.batch);
  tn.read("accumulate", t.accumulate);
  tn.read("steps", t.steps);
  tn.read("steps_per_epoch", t.steps_per_epoch);
  tn.read("seed", t.seed);
  tn.read("augment", t.augment);
  tn.read("sync_batch_norm", t.sync_batch_norm);
  tn.read("foreground_fraction", t.foreground_fraction);
  tn.read("checkpoint_every", t.checkpoint_every);
  tn.read("keep_last", t.keep_last);
  tn.read("early_stopping", t.early_stopping);
  tn.read("prefetch", t.prefetch);
  tn.read("channels_last", t.channels_last);
  tn.read("augment_rotate90", t.augmentation.rotate90);
  tn.read("augment_intensity_scale", t.augmentation.intensity_scale);
  tn.read("augment_intensity_shift", t.augmentation.intensity_shift);
  tn.read("augment_gaussian_noise", t.augmentation.gaussian_noise);
  tn.read("augment_uniform_noise", t.augmentation.uniform_noise);
  tn.read("grad_clip", t.grad_clip);
  tn.read("scale_learning_rate", t.scale_learning_rate);
  OptimizerOptions& o = t.optimizer;
  tn.read("learning_rate", o.learning_rate);
  tn.read("warmup_steps", o.warmup_steps);
  tn.read("momentum", o.momentum);
  tn.read("weight_decay", o.weight_decay);
  tn.read("step_size", o.step_size);
  tn.read("gamma", o.gamma);
  tn.read("power", o.power);
  tn.read("min_lr_fraction", o.min_lr_fraction);
  tn.read_as("optimizer", o.kind, parse_optimizer_kind);
  tn.read_as("schedule", o.schedule, parse_schedule_kind);
  for (const ConfigSection& stage : tn.list("curriculum")) {
    CurriculumStage cs;
    stage.read("epoch", cs.from_epoch);
    stage.read("tile", cs.tile);
    t.curriculum.push_back(cs);
  }
  read_loss(tn.section("loss"), t.loss);
}

void read_parallel(const ConfigSection& pn, RunConfig& c) {
  pn.read("activation_checkpoint", c.checkpoint);
  pn.read("micro_batches", c.micro_batches);
  pn.read("schedule", c.schedule);
  pn.read("dp", c.shape.data);
  pn.read("pp", c.shape.pipeline);
  pn.read("sp", c.shape.spatial);
  pn.read("fusion_mib", c.fusion_mib);
  pn.read("scale_learning_rate", c.train.scale_learning_rate);
}

void read_data(const ConfigSection& dn, RunConfig& c) {
  const ConfigSection holdout = dn.section("holdout");
  holdout.read("axis", c.holdout.axis);
  holdout.read("fraction", c.holdout.fraction);
  dn.read("class_names", c.class_names);
  c.pairs_where = dn.where("pairs");
  for (const ConfigSection& p : dn.list("pairs")) {
    PairConfig pair;
    pair.where = p.where();
    pair.prefix = p.dotted("");
    p.read("image", pair.image);
    p.read("labels", pair.labels);
    p.read("label_attribute", pair.rasterize.attribute);  // polygon labels only
    p.read("label_layer", pair.rasterize.layer);
    c.pairs.push_back(std::move(pair));
  }
}

// What the file must have, checked once every key is known to be spelt right.
void require_pairs(const RunConfig& c) {
  if (c.pairs.empty()) throw Error(c.pairs_where + ": data.pairs must list at least one {image, labels} pair");
  for (const PairConfig& p : c.pairs)
    if (p.image.empty() || p.labels.empty())
      throw Error(p.where + ": " + p.prefix + (p.image.empty() ? "image" : "labels") + ": required (every pair names an image and its labels)");
}

RunConfig read_config(const ConfigFile& file) {
  const ConfigSection root = file.root();
  RunConfig c;
  c.model = read_model(root.section("model"), c.in_channels_given);
  root.read("run_dir", c.train.run_dir);
  const ConfigSection tn = root.section("train");
  read_train_options(tn, c.train);
  tn.read("validate", c.validate);
  read_parallel(root.section("parallel"), c);
  read_data(root.section("data"), c);
  file.reject_unknown_keys();  // first: a misspelt key is reported as such, not as a missing one
  require_pairs(c);
  return c;
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

struct Dataset {
  std::vector<std::unique_ptr<ImageSource>> images, labels;
  std::vector<TrainingPair> pairs, validation;
};

// Opens every pair (burning polygon labels onto the image grid) and cuts off the holdout.
Dataset open_pairs(const RunConfig& c, const std::string& config) {
  Dataset d;
  for (const PairConfig& p : c.pairs) {
    d.images.push_back(io::open_image(resolve_path(config, p.image)));
    std::string label_path = resolve_path(config, p.labels);
    if (io::is_vector_path(label_path)) {
      // Polygons: burnt onto the image's grid once, kept in the run directory.
      const io::RasterizeOptions& ro = p.rasterize;
      const std::filesystem::path burnt = std::filesystem::path(c.train.run_dir) / "labels" /
                                          (std::filesystem::path(label_path).stem().string() + "-" + ro.attribute + ".tif");
      std::filesystem::create_directories(burnt.parent_path());
      io::rasterize_polygons(label_path, d.images.back()->info().path, burnt.string(), ro);
      label_path = burnt.string();
    }
    d.labels.push_back(io::open_image(label_path));
    c.holdout.validate(static_cast<int>(d.images.back()->info().extent.size()));
    if (d.images.back()->info().extent != d.labels.back()->info().extent)
      throw Error(d.labels.back()->info().path + ": label size " + to_string(d.labels.back()->info().extent) +
                  " differs from image size " + to_string(d.images.back()->info().extent) + " of " +
                  d.images.back()->info().path);
    const Index& extent = d.images.back()->info().extent;
    d.pairs.push_back({d.images.back().get(), d.labels.back().get(), training_region(extent, c.holdout)});
    if (c.validate && c.holdout.fraction > 0)
      d.validation.push_back({d.images.back().get(), d.labels.back().get(), holdout_region(extent, c.holdout)});
  }
  return d;
}

// Flags override the file.
void apply_flags(const Flags& f, RunConfig& c) {
  TrainOptions& t = c.train;
  if (f.dp) c.shape.data = *f.dp;
  if (f.pp) c.shape.pipeline = *f.pp;
  if (f.sp) c.shape.spatial = *f.sp;
  if (f.fusion_mib) c.fusion_mib = *f.fusion_mib;
  if (f.micro_batches) c.micro_batches = *f.micro_batches;
  if (f.schedule) c.schedule = *f.schedule;
  if (f.checkpoint) c.checkpoint = *f.checkpoint;
  if (f.scale_lr) t.scale_learning_rate = true;
  if (f.warmup) t.optimizer.warmup_steps = *f.warmup;
  if (!f.run_dir.empty()) t.run_dir = f.run_dir;
  if (f.steps) t.steps = *f.steps;
  if (f.tile) t.tile = *f.tile;
  if (f.batch) t.batch = *f.batch;
  if (f.lr) t.optimizer.learning_rate = *f.lr;
  if (f.seed) t.seed = *f.seed;
  t.progress = !f.no_progress;
}

// `--resume auto`: RUN/checkpoints/last.pt; when that is damaged, the newest intact
// step-NNNNNN.pt (train.keep_last > 1), said on stderr. Refused when there is none.
std::string auto_resume_checkpoint(const std::string& run_dir, bool say) {
  const RunLayout run(run_dir);
  const std::string last = run.last_checkpoint();
  try {
    verify_checkpoint(last);
    return last;
  } catch (const Error& damaged) {
    const std::vector<std::string> kept = run.step_checkpoints();
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
      try {
        verify_checkpoint(*it);
      } catch (const Error&) {
        continue;
      }
      if (say) std::fprintf(stderr, "tessera: warning: %s; resuming from %s instead\n", damaged.what(), it->c_str());
      return *it;
    }
    throw Error(std::string(damaged.what()) + (kept.empty() ? "; no step checkpoint to fall back to (train.keep_last > 1 keeps some)"
                                                            : "; no intact step checkpoint to fall back to either"));
  }
}

void run(const Flags& f) {
  const ConfigFile file = ConfigFile::load(f.config);
  RunConfig c = read_config(file);
  c.train.run_dir = resolve_path(f.config, c.train.run_dir);
  apply_flags(f, c);
  UNetOptions& model = c.model;
  TrainOptions& t = c.train;
  const parallel::GridShape& shape = c.shape;
  const double fusion_mib = c.fusion_mib;
  const int micro_batches = c.micro_batches;
  const std::string& schedule = c.schedule;
  const std::string& checkpoint = c.checkpoint;
  CheckpointMeta meta;
  meta.class_names = c.class_names;

  Dataset data = open_pairs(c, f.config);
  const auto& images = data.images;
  if (!c.in_channels_given) model.in_channels = images.front()->info().channels;
  model.dims = static_cast<int>(images.front()->info().extent.size());
  if (meta.class_names.empty())
    for (int k = 0; k < model.classes; ++k) meta.class_names.push_back("class " + std::to_string(k));
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
    t.resume = f.resume == "auto" ? auto_resume_checkpoint(t.run_dir, root_rank) : f.resume;
    if (root_rank) std::fprintf(stderr, "train: resuming from %s\n", t.resume.c_str());
  }
  const int threads = configure_threads(f.threads.value_or(0));
  torch::manual_seed(t.seed);
  UNet net(model);
  if (root_rank) {
    std::filesystem::create_directories(t.run_dir);
    std::ofstream resolved(std::filesystem::path(t.run_dir) / "config.yaml");
    YAML::Node out = YAML::Clone(file.document());
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
  const TrainReport r = train(net, data.pairs, t, meta, hooks.get(), data.validation);
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
