// tessera train --config FILE.yaml [overrides]: train a U-Net on image/label pairs.
//
// The YAML mirrors the options structs (TrainOptions, UNetOptions); flags override it. Its
// keys are declared once, in train_config.hpp (fields(RunConfig&)), which drives reading,
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
// (config_file.hpp); so is a value of the wrong type.
//
// Under an MPI launcher (`mpirun -np P tessera train …`) the ranks form a ProcessGrid
// (default: all ranks on the data axis) and train data-parallel: `batch` is per replica,
// the global batch is batch × dp, and the result equals one process with the global batch.
// With --pp K each replica is a pipeline of K stages (parallel/pipeline_hooks.hpp), dp = P / K.
// With --sp S each tile of a replica is split into S blocks, one per rank, along the first
// axis or as --sp-mesh says (2x2; parallel/spatial_hooks.hpp), dp = P / S; `same` padding only.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <torch/torch.h>

#include "commands.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/operator_profile.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "options_cli.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"
#include "tessera/run/staged_file.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/core/dsn_trainer.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/rasterize.hpp"
#include "tessera/parallel/modes/data_parallel.hpp"
#include "tessera/parallel/modes/domain_hooks.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/parallel/modes/pipeline_hooks.hpp"
#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/modes/spatial_hooks.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

// The flags that are not config keys; the others are `overrides` (train_flags()).
struct Flags {
  std::string config;
  std::optional<int> threads;
  std::string resume;
  std::string profile;  ///< Chrome trace of rank 0's operators (empty: none)
  bool no_progress = false;
  FlagOverrides<RunConfig> overrides;
};

// Relative paths in a config are relative to the config file.
std::string resolve_path(const std::string& config, const std::string& p) {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(config).parent_path() / p).lexically_normal().string();
}

// The file, then the flags over it.
RunConfig load_config(const Flags& f) {
  RunConfig c = read_run_config(ConfigFile::load(f.config));
  c.train.run_dir = resolve_path(f.config, c.train.run_dir);
  f.overrides.apply(c);
  c.train.progress = !f.no_progress;
  return c;
}

// Rank 0 prints each rank's peak memory (its device's memory in use on a GPU; on CPU ranks,
// which share the host, the rank's own resident set) and mean utilisation.
void print_telemetry_summary(parallel::Communicator& world, const parallel::DeviceMonitor& monitor) {
  const parallel::DeviceSummary s = monitor.summary();
  const bool cpu = s.device == "cpu";
  const double peak = double(cpu ? s.peak_process_rss_bytes : s.peak_mem_used_bytes);
  torch::Tensor mine = torch::tensor({peak, s.mean_util_pct}, torch::kDouble);
  torch::Tensor all = world.allgather(mine);
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r)
    std::fprintf(stderr, "telemetry: rank %d %s peak %s %.1f MiB, mean utilisation %.0f%%\n", r, s.device.c_str(),
                 cpu ? "resident memory" : "memory", all[r][0].item<double>() / (1 << 20), all[r][1].item<double>());
}

struct Dataset {
  std::vector<std::unique_ptr<ImageSource>> images, labels;  // as opened, and resampled copies
  std::vector<TrainingPair> pairs, validation;
  std::map<const ImageSource*, Normalization> image_norms;   // per-image kinds (mr), by image
  VolumeResampling resampling;
  std::string modality;  // "CT", "MR", a dataset's channel name, or ""
  std::vector<std::string> notes;  // what preprocessing chose, printed with the plan (root rank)
};

// An (image, labels) pair as opened, before resampling, and what it is for.
struct OpenedPair {
  const ImageSource* image = nullptr;
  const ImageSource* labels = nullptr;
  enum Role { kHoldout, kWhole, kValidation } role = kWhole;
};

// A pair's label path: polygons are burnt onto the image's grid once, kept in the run directory.
std::string label_raster(const RunConfig& c, const PairConfig& p, const std::string& label_path, const ImageSource& image) {
  if (!io::is_vector_path(label_path)) return label_path;
  const io::RasterizeOptions& ro = p.rasterize;
  const std::filesystem::path burnt = std::filesystem::path(c.train.run_dir) / "labels" /
                                      (std::filesystem::path(label_path).stem().string() + "-" + ro.attribute + ".tif");
  std::filesystem::create_directories(burnt.parent_path());
  io::rasterize_polygons(label_path, image.info().path, burnt.string(), ro);
  return burnt.string();
}

// Opens an image and its labels into `d`; their sizes must agree.
OpenedPair open_pair(Dataset& d, const std::string& image_path, const std::function<std::string(const ImageSource&)>& labels_path,
                     OpenedPair::Role role) {
  d.images.push_back(io::open_image(image_path));
  const ImageSource& image = *d.images.back();
  d.labels.push_back(io::open_image(labels_path(image)));
  const ImageSource& labels = *d.labels.back();
  if (image.info().extent != labels.info().extent)
    throw Error(labels.info().path + ": label size " + to_string(labels.info().extent) + " differs from image size " +
                to_string(image.info().extent) + " of " + image.info().path);
  if (d.modality.empty()) d.modality = volume_modality(image);
  return {&image, &labels, role};
}

// Every opened pair onto the grid the network trains on (volumes: data.resample, by default
// the training cases' median spacing), then its training region or validation box.
void place_pairs(const RunConfig& c, Dataset& d, const std::vector<OpenedPair>& opened, const std::string& config) {
  std::vector<const ImageSource*> training;
  for (const OpenedPair& o : opened)
    if (o.role != OpenedPair::kValidation) training.push_back(o.image);
  d.resampling = choose_resampling(c.data.resample, training, config);
  int resampled = 0;
  auto on_grid = [&](const ImageSource* source, bool is_labels) {
    std::unique_ptr<ImageSource> moved = to_network_grid(*source, d.resampling, is_labels);
    if (!moved) return source;
    resampled += is_labels ? 0 : 1;
    (is_labels ? d.labels : d.images).push_back(std::move(moved));
    return static_cast<const ImageSource*>((is_labels ? d.labels : d.images).back().get());
  };
  for (const OpenedPair& o : opened) {
    const ImageSource* image = on_grid(o.image, false);
    const ImageSource* labels = on_grid(o.labels, true);
    const Index& extent = image->info().extent;
    const Box whole{Index(extent.size(), 0), extent};
    if (o.role == OpenedPair::kHoldout) {
      c.data.holdout.validate(static_cast<int>(extent.size()));
      d.pairs.push_back({image, labels, training_region(extent, c.data.holdout)});
      if (c.validate && c.data.holdout.fraction > 0) d.validation.push_back({image, labels, holdout_region(extent, c.data.holdout)});
    } else if (o.role == OpenedPair::kWhole) {
      d.pairs.push_back({image, labels, whole});
    } else if (c.validate) {
      d.validation.push_back({image, labels, whole});
    }
  }
  if (d.resampling.enabled())
    d.notes.push_back("volumes at " + describe(d.resampling) + ": " + std::to_string(resampled) + " of " +
                      std::to_string(opened.size()) + " resampled");
}

// Opens every pair (burning polygon labels onto the image grid) and cuts off the holdout.
Dataset open_pairs(const RunConfig& c, const std::string& config) {
  Dataset d;
  std::vector<OpenedPair> opened;
  for (const PairConfig& p : c.data.pairs)
    opened.push_back(open_pair(
        d, resolve_path(config, p.image),
        [&](const ImageSource& image) { return label_raster(c, p, resolve_path(config, p.labels), image); },
        OpenedPair::kHoldout));
  place_pairs(c, d, opened, config);
  return d;
}

// data.dataset: its cases as pairs, the validation cases (data.validation, or fold K of N:
// every N-th case by id from the K-th) as whole-image validation pairs, its labels as the
// class names, its channel name as the modality.
Dataset open_dataset(RunConfig& c, const std::string& config) {
  const MsdDataset msd = read_msd_dataset(resolve_path(config, c.data.dataset));
  take_dataset_classes(c, msd.class_names, config);
  MsdSplit split;
  try {
    split = split_msd_cases(msd, c.data.validation, c.data.fold, c.data.folds);
  } catch (const Error& e) {
    throw Error(config + ": " + e.what());
  }
  Dataset d;
  d.modality = msd.channel;
  std::vector<OpenedPair> opened;
  auto open_case = [&](const MsdCase& k, OpenedPair::Role role) {
    opened.push_back(open_pair(d, k.image, [&](const ImageSource&) { return k.label; }, role));
  };
  for (const MsdCase& k : split.training) open_case(k, OpenedPair::kWhole);
  for (const MsdCase& k : split.validation) open_case(k, OpenedPair::kValidation);
  place_pairs(c, d, opened, config);
  std::string held;
  for (const MsdCase& k : split.validation) held += (held.empty() ? ": " : ", ") + k.id;
  const std::string fold =
      c.data.folds > 0 ? " (fold " + std::to_string(c.data.fold) + " of " + std::to_string(c.data.folds) + ")" : "";
  std::fprintf(stderr, "train: %s: %zu training cases, %zu validation cases%s%s\n", msd.folder.c_str(),
               split.training.size(), split.validation.size(), fold.c_str(), held.c_str());
  return d;
}

// The normalisation of data.normalization with its statistics over the training pairs; a
// per-image kind (mr) resolved for every image, training and validation.
Normalization normalise(const RunConfig& c, Dataset& d, const std::string& config) {
  std::vector<io::LabelledRegion> training;
  for (const TrainingPair& p : d.pairs) training.push_back({p.image, p.labels, p.region});
  std::string report;
  const Normalization norm = choose_normalization(c.data.normalization, training, d.modality, config, report);
  d.notes.push_back(report);
  if (norm.resolved()) return norm;
  for (std::vector<TrainingPair>* set : {&d.pairs, &d.validation})
    for (TrainingPair& p : *set) {
      auto it = d.image_norms.find(p.image);
      if (it == d.image_norms.end()) it = d.image_norms.emplace(p.image, io::resolve_normalization(norm, *p.image)).first;
      p.norm = &it->second;
    }
  return norm;
}

// The model as the data makes it (channels and dimensions of the first image) and the
// description every checkpoint carries (normalisation and resampling included).
CheckpointMeta describe_model(RunConfig& c, Dataset& data, const std::string& config) {
  UNetOptions& model = c.model.options;
  const ImageSource& first = *data.pairs.front().image;
  if (!c.in_channels_given) model.in_channels = first.info().channels;
  model.dims = static_cast<int>(first.info().extent.size());
  CheckpointMeta meta;
  meta.class_names = c.data.class_names;
  if (meta.class_names.empty())
    for (int k = 0; k < model.classes; ++k) meta.class_names.push_back("class " + std::to_string(k));
  if (static_cast<int>(meta.class_names.size()) != model.classes)
    throw Error(config + ": data.class_names has " + std::to_string(meta.class_names.size()) +
                " names but model.classes is " + std::to_string(model.classes));
  model.validate();
  meta.model = model;
  meta.norm = normalise(c, data, config);
  meta.resampling = data.resampling;
  return meta;
}

// The grid the flags ask for; the combinations the trainer cannot run are refused here,
// before the grid is built.
parallel::GridShape grid_shape(const ParallelConfig& p) {
  if (p.pp > 1 && p.sp > 1) throw Error("--pp with --sp is not supported; use one of them");
  return parallel::GridShape().with_data(p.dp).with_pipeline(p.pp).with_spatial(p.sp);
}

// The blocks of every tile with --sp S: --sp-mesh, or S blocks along the first axis.
SpatialMesh spatial_mesh(const ParallelConfig& p, int spatial, int dims) {
  if (p.sp_mesh.empty()) return SpatialMesh::along_first_axis(spatial, dims);
  return SpatialMesh::parse(p.sp_mesh, dims);
}

// "2x2": the mesh as --sp-mesh spells it (the resolved config records it).
std::string mesh_text(const SpatialMesh& mesh) {
  std::string s;
  for (int parts : mesh.parts) s += (s.empty() ? "" : "x") + std::to_string(parts);
  return s;
}

// Every tile side of the run, with the key that sets it: train.tile and the curriculum's.
std::vector<std::pair<std::string, int64_t>> tile_sides(const TrainOptions& t) {
  std::vector<std::pair<std::string, int64_t>> sides = {{"train.tile", t.tile}};
  for (size_t i = 0; i < t.curriculum.size(); ++i)
    sides.push_back({"train.curriculum[" + std::to_string(i) + "].tile", t.curriculum[i].tile});
  return sides;
}

// What spatial parallelism refuses: a `valid` model, a mesh that is not --sp blocks or has
// more axes than the model, tiles that do not split into blocks starting on multiples of the
// pooling factor.
void check_spatial(const RunConfig& c, int spatial, const std::string& config) {
  const UNetOptions& model = c.model.options;
  const std::string sp = "--sp " + std::to_string(spatial);
  if (model.padding != Padding::kSame)
    throw Error(config + ": " + sp + ": spatial parallelism needs a `same`-padding U-Net, model.padding is " +
                to_string(model.padding) + " (use --padding same)");
  const SpatialMesh mesh = spatial_mesh(c.parallel, spatial, model.dims);
  if (mesh.size() != spatial)
    throw Error("--sp-mesh " + c.parallel.sp_mesh + ": " + std::to_string(mesh.size()) + " blocks, but " + sp +
                " (the mesh's product must equal --sp)");
  for (const auto& [key, side] : tile_sides(c.train))
    for (int a = 0; a < mesh.dims(); ++a) {
      try {
        block_offsets(side + unet_remainder(model), mesh.parts[size_t(a)], unet_alignment(model),
                                key + " on axis " + std::to_string(a) + " of " + sp + " (mesh " + mesh.describe() + ")");
      } catch (const Error& e) {
        throw Error(config + ": " + e.what());
      }
    }
}

// What the parallel modes refuse, refused before the run starts.
// parallel.gradient_compression → the format gradients travel in: none (or fp32), bf16, fp16.
Precision gradient_wire(const std::string& s) {
  if (s == "none" || s == "fp32") return Precision::kFp32;
  if (s == "bf16" || s == "fp16") return parse_precision(s);
  throw Error("'" + s + "' is not one of none, bf16, fp16");
}

void check_parallel(const RunConfig& c, const parallel::ProcessGrid& grid, const std::string& config) {
  const TrainOptions& t = c.train;
  const UNetOptions& model = c.model.options;
  const int micro_batches = c.parallel.micro_batches;
  if (grid.shape().spatial > 1 || !c.parallel.sp_mesh.empty()) check_spatial(c, grid.shape().spatial, config);
  try {
    if (gradient_wire(c.parallel.gradient_compression) != Precision::kFp32 &&
        (grid.shape().spatial > 1 || grid.shape().pipeline > 1))
      throw Error(c.parallel.gradient_compression +
                  " is for data parallelism only (pipeline stages and spatial blocks sum gradients in fp32)");
  } catch (const Error& e) {
    throw Error(config + ": parallel.gradient_compression: " + e.what());
  }
  if (micro_batches < 0 || micro_batches > t.batch)
    throw Error(config + ": parallel.micro_batches: " + std::to_string(micro_batches) + " must be in 0 … batch (" +
                std::to_string(t.batch) + "; 0: one tile per micro-batch)");
  if (grid.shape().pipeline == 1) return;
  const LayerSequence seq = unet_layer_sequence(model, t.tile + unet_remainder(model) + 2 * unet_halo(model));
  if (seq.size() < grid.shape().pipeline)
    throw Error("--pp: " + std::to_string(grid.shape().pipeline) + " stages for a model of " + std::to_string(seq.size()) +
                " layers");
  try {
    parallel::PipelineOptions(parallel::balance_naive(seq.size(), grid.shape().pipeline).sizes)
        .with_micro_batches(std::max(1, micro_batches))
        .with_loss(t.loss)
        .validate(seq);
  } catch (const Error& e) {
    throw Error(config + ": " + e.what() + " (pipeline training, --pp " + std::to_string(grid.shape().pipeline) + ")");
  }
}

// Pipeline stages and spatial blocks run forward and backward through their hooks; one
// stage of one block is plain data parallelism.
struct Hooks {
  std::unique_ptr<TrainHooks> hooks;
  std::function<void(std::function<void(int64_t, double)>)> set_step_callback;
  parallel::PipelineTrainHooks* pipeline = nullptr;  // for per-stage telemetry
  parallel::SpatialTrainHooks* spatial = nullptr;    // for the halo bytes in the report
  parallel::DataParallelHooks* data = nullptr;       // for the communication timeline in the report
  TrainHooks* get() const { return hooks.get(); }
};

Hooks make_hooks(const RunConfig& c, parallel::ProcessGrid& grid) {
  const ParallelConfig& p = c.parallel;
  if (c.train.precision != "fp32" && (grid.shape().spatial > 1 || grid.shape().pipeline > 1))
    throw Error("train.precision " + c.train.precision +
                ": data parallelism only (pipeline stages and spatial blocks train in fp32)");
  Hooks out;
  if (grid.shape().spatial > 1) {
    auto h = std::make_unique<parallel::SpatialTrainHooks>(
        grid.spatial(), grid.data(), spatial_mesh(p, grid.shape().spatial, c.model.options.dims),
        parallel::SpatialHookOptions()
            .with_sync_batch_norm(c.train.sync_batch_norm)
            .with_writes_outputs(grid.is_root()));
    out.set_step_callback = [blocks = h.get()](auto fn) { blocks->set_step_callback(std::move(fn)); };
    out.spatial = h.get();
    out.hooks = std::move(h);
  } else if (grid.shape().pipeline > 1) {
    auto h = std::make_unique<parallel::PipelineTrainHooks>(
        grid.pipeline(), grid.data(),
        parallel::PipelineHookOptions()
            .with_micro_batches(p.micro_batches)
            .with_schedule(parse_pipeline_schedule(p.schedule))
            .with_checkpoint(parse_activation_checkpoint(p.activation_checkpoint))
            .with_writes_outputs(grid.is_root()));
    out.set_step_callback = [stage = h.get()](auto fn) { stage->set_step_callback(std::move(fn)); };
    out.pipeline = h.get();
    out.hooks = std::move(h);
  } else {
    auto h = std::make_unique<parallel::DataParallelHooks>(grid.data(), parallel::DataParallelOptions()
                                                                           .with_fusion_bytes(int64_t(p.fusion_mib * (1 << 20)))
                                                                           .with_overlap(p.overlap_allreduce)
                                                                           .with_compression(gradient_wire(p.gradient_compression))
                                                                           .with_writes_outputs(grid.is_root()));
    out.set_step_callback = [stage = h.get()](auto fn) { stage->set_step_callback(std::move(fn)); };
    out.data = h.get();
    out.hooks = std::move(h);
  }
  return out;
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

// RUN/config.yaml: every field as this run uses it (the grid as resolved), written staged.
void write_resolved_config(RunConfig c, const parallel::ProcessGrid& grid) {
  c.parallel.dp = grid.shape().data;
  c.parallel.pp = grid.shape().pipeline;
  c.parallel.sp = grid.shape().spatial;
  if (c.parallel.sp > 1) c.parallel.sp_mesh = mesh_text(spatial_mesh(c.parallel, c.parallel.sp, c.model.options.dims));
  std::filesystem::create_directories(c.train.run_dir);
  write_file_atomically(RunLayout(c.train.run_dir).config(), {resolved_config_yaml(c)});
}

// ", spatial 2 × 2 (blocks of 24 × 24 px)": the blocks of a train.tile tile with --sp
// ("16–24" along an axis whose blocks differ); empty without.
std::string describe_blocks(const RunConfig& c, const parallel::SpatialTrainHooks* spatial) {
  if (!spatial) return "";
  const UNetOptions& model = c.model.options;
  const SpatialMesh& mesh = spatial->decomposition().mesh();
  std::string blocks;
  for (int a = 0; a < mesh.dims(); ++a) {
    const std::vector<int64_t> at = block_offsets(c.train.tile + unet_remainder(model), mesh.parts[size_t(a)],
                                                            unet_alignment(model), "train.tile");
    int64_t lo = at.back(), hi = 0;
    for (size_t i = 1; i < at.size(); ++i) {
      lo = std::min(lo, at[i] - at[i - 1]);
      hi = std::max(hi, at[i] - at[i - 1]);
    }
    blocks += (a ? " × " : "") + std::to_string(lo) + (lo == hi ? "" : "–" + std::to_string(hi));
  }
  return ", spatial " + mesh.describe() + " (blocks of " + blocks + (model.dims == 3 ? " voxels)" : " px)");
}

void print_plan(const RunConfig& c, const parallel::ProcessGrid& grid, const Hooks& hooks, int threads, UNet& net) {
  const UNetOptions& model = c.model.options;
  const TrainOptions& t = c.train;
  int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  const std::string name = model.is_builtin() ? "U-Net" : model.name;
  std::fprintf(stderr, "train: %d-D %s L=%d f=%d, %lld parameters, halo %lld, tiles %lld+%lld (input %lld), %d threads, %s%s, global batch %lld\n",
               model.dims, name.c_str(), model.levels, model.base_filters, (long long)parameters,
               (long long)unet_halo(model), (long long)t.tile, (long long)unet_remainder(model),
               (long long)(t.tile + unet_remainder(model) + (model.padding == Padding::kValid ? 2 * unet_halo(model) : 0)),
               threads, grid.describe().c_str(),
               describe_blocks(c, hooks.spatial).c_str(), (long long)t.batch * grid.shape().data);
}

std::unique_ptr<parallel::DeviceMonitor> start_monitor(const TrainOptions& t, parallel::Communicator& world,
                                                       const Hooks& hooks) {
  parallel::DeviceMonitorOptions mo;
  mo.run_dir = t.run_dir;
  mo.rank = world.rank();
  mo.device = parallel::select_device(parallel::launch_info(), torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0);
  auto monitor = std::make_unique<parallel::DeviceMonitor>(mo);
  monitor->set_phase("train");
  hooks.set_step_callback([m = monitor.get(), batch = t.batch, pipeline = hooks.pipeline](int64_t step, double) {
    m->set_step(step);
    m->set_tiles_done(step * batch);
    if (pipeline && pipeline->last_step()) {
      const parallel::PipelineStepStats& st = *pipeline->last_step();
      m->set_pipeline_stage({pipeline->stage_index(), st.seconds, st.compute_seconds, st.bytes_sent, st.bytes_received,
                             peak_resident_bytes()});
    }
  });
  return monitor;
}

// "data parallel: 3 buckets per step, 2 posted during the backward; communication 1.9 ms per
// step, 84% of it during the backward, 0.4 ms waited after it" (rank 0's view).
void print_communication(const parallel::DataParallelHooks& h) {
  const parallel::CommunicationTimeline& t = h.timeline();
  if (h.replicas() < 2 || h.buckets_reduced() == 0) return;
  const double steps = double(std::max<int64_t>(1, t.steps));
  if (t.steps == 0) {
    std::printf("data parallel: %lld gradient buckets reduced after the backward (overlap off)\n",
                (long long)h.buckets_reduced());
    return;
  }
  const std::string wire = h.compression() == Precision::kFp32
                               ? ""
                               : " (gradients sent in " + to_string(h.compression()) + ", error feedback)";
  std::printf("data parallel: %.1f buckets per step, %.1f posted during the backward; communication %.2f ms per step, "
              "%.0f%% of it during the backward, %.2f ms waited after it%s\n",
              double(h.buckets_reduced()) / steps, double(h.buckets_overlapped()) / steps, 1e3 * t.busy_seconds / steps,
              100 * t.hidden_share(), 1e3 * t.exposed_seconds / steps, wire.c_str());
}

void print_report(const TrainReport& r) {
  std::printf("trained %lld steps in %.1f s (%.1f tiles/s), final loss %.4f%s\ncheckpoint: %s\n", (long long)r.steps,
              r.seconds, r.tiles_per_second, r.final_loss, r.stopped_early ? " (stopped early)" : "",
              r.checkpoint.c_str());
  if (r.best_validation >= 0)
    std::printf("best validation mean Dice %.4f: %s\n", r.best_validation, r.best_checkpoint.c_str());
}

// ---- Domain Separation Network (model.kind dsn) ------------------------------------------

// Domain-parallel hooks that also drive the device monitor.
class MonitoredDomainHooks : public parallel::DomainParallelHooks {
 public:
  using DomainParallelHooks::DomainParallelHooks;
  std::function<void(int64_t, double)> step_callback;
  void on_step(int64_t step, double loss) override {
    if (step_callback) step_callback(step, loss);
  }
};

// "0 (source)", "1 2 3": domains as the plan line names them.
std::string describe_domains(const std::vector<int>& domains) {
  std::string s;
  for (int d : domains) s += (s.empty() ? "" : ", ") + (d == 0 ? std::string("source") : "target " + std::to_string(d));
  return s;
}

// mpirun -np P tessera train --config dsn.yaml: P ranks in G domain groups of P / G replicas
// (parallel.dp), group g training the domains [g·D/G, (g+1)·D/G) (parallel/domain_hooks.hpp).
void run_dsn(const Flags& f, RunConfig& c) {
  TrainOptions& t = c.train;
  if (c.parallel.pp > 1 || c.parallel.sp > 1 || !c.parallel.sp_mesh.empty())
    throw Error(f.config + ": model.kind dsn runs domain parallel (with --dp inside each domain); --pp and --sp are not "
                "supported with it");
  if (t.precision != "fp32")
    throw Error(f.config + ": train.precision " + t.precision + ": model.kind dsn trains in fp32");
  if (!f.resume.empty()) throw Error("--resume: a DSN run cannot resume yet (its checkpoints hold no optimiser state)");
  if (!c.model.options.is_builtin())
    throw Error(f.config + ": model.kind dsn shares the built-in U-Net's encoder; model " + c.model.options.name +
                " cannot be one (use a unet preset)");
  // The source as plain pairs: its holdout is never trained on (score it with tessera eval).
  RunConfig source = c;
  source.data.pairs = c.data.source.pairs;
  source.validate = false;
  Dataset data = open_pairs(source, f.config);
  CheckpointMeta meta = describe_model(source, data, f.config);
  c.model.options = source.model.options;
  const UNetOptions& model = c.model.options;
  std::vector<std::unique_ptr<ImageSource>> target_images;
  std::vector<std::vector<TrainingPair>> domains{data.pairs};
  for (const TargetConfig& target : c.data.targets) {
    domains.emplace_back();
    for (const std::string& path : target.images) {
      target_images.push_back(io::open_image(resolve_path(f.config, path)));
      const ImageSource& image = *target_images.back();
      domains.back().push_back({&image, nullptr, Box{Index(image.info().extent.size(), 0), image.info().extent}});
    }
  }
  DsnOptions dsn_options = c.model.dsn;
  dsn_options.domains = static_cast<int>(domains.size());
  try {
    dsn_options.validate(model);
  } catch (const Error& e) {
    throw Error(f.config + ": " + e.what());
  }
  check_dsn_training(model, dsn_options, domains, t);

  parallel::Communicator& world = parallel::world();
  const int groups = parallel::domain_groups(world.size(), dsn_options.domains, c.parallel.dp);
  MonitoredDomainHooks hooks(world, groups, dsn_options.domains);
  const bool root_rank = world.rank() == 0;
  const int threads = configure_threads(f.threads.value_or(0));
  Dsn dsn(model, dsn_options, hooks.domains(dsn_options.domains), t.seed);
  if (root_rank) {
    c.parallel.dp = hooks.replicas();
    std::filesystem::create_directories(t.run_dir);
    write_file_atomically(RunLayout(t.run_dir).config(), {resolved_config_yaml(c)});
    for (const std::string& note : data.notes) std::fprintf(stderr, "train: %s\n", note.c_str());
    const int64_t priv = dsn_private_parameter_count(model, dsn_options);
    std::fprintf(stderr,
                 "train: DSN, 1 source + %d target(s), %d-D U-Net L=%d f=%d (%lld parameters) + private encoders of "
                 "%lld + reconstruction decoder %lld + domain classifier %lld; %s similarity; tiles %lld, batch %d per "
                 "domain and replica; %d ranks = %d domain groups x %d replicas, %d threads\n",
                 dsn_options.domains - 1, model.dims, model.levels, model.base_filters,
                 (long long)unet_parameter_count(model), (long long)priv,
                 (long long)dsn_recon_parameter_count(model, dsn_options),
                 (long long)dsn_classifier_parameter_count(model, dsn_options), to_string(dsn_options.similarity).c_str(),
                 (long long)t.tile, t.batch, world.size(), groups, hooks.replicas(), threads);
    for (int g = 0; g < groups; ++g)
      std::fprintf(stderr, "train: domain group %d (ranks %d-%d): %s\n", g, g * hooks.replicas(),
                   (g + 1) * hooks.replicas() - 1, describe_domains(parallel::domains_of_group(g, groups, dsn_options.domains)).c_str());
  }
  parallel::DeviceMonitorOptions mo;
  mo.run_dir = t.run_dir;
  mo.rank = world.rank();
  mo.device = parallel::select_device(parallel::launch_info(), torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0);
  parallel::DeviceMonitor monitor(mo);
  monitor.set_phase("train");
  hooks.step_callback = [&monitor, tiles = int64_t(t.batch) * int64_t(hooks.domains(dsn_options.domains).size())](int64_t step, double) {
    monitor.set_step(step);
    monitor.set_tiles_done(step * tiles);
  };
  RunWriter run_writer(t.run_dir);
  const TrainReport r = train_dsn(dsn, domains, t, meta, &hooks, &run_writer);
  monitor.set_phase("done");
  monitor.sample_now();
  print_telemetry_summary(world, monitor);
  if (root_rank) print_report(r);
}

void run(const Flags& f) {
  RunConfig c = load_config(f);
  validate(c.data.normalization, f.config);  // before any image is read
  validate(c.data.resample, f.config);
  if (c.model.is_dsn()) return run_dsn(f, c);
  const UNetOptions& model = c.model.options;
  if (!model.is_builtin() && (c.parallel.pp > 1 || c.parallel.sp > 1))
    throw Error(f.config + ": model " + model.name + " is a registry model without a layer sequence; --pp and --sp "
                "cut the built-in U-Net's layers (train it data parallel, or use a unet preset)");
  Dataset data = c.data.dataset.empty() ? open_pairs(c, f.config) : open_dataset(c, f.config);
  const CheckpointMeta meta = describe_model(c, data, f.config);
  TrainOptions& t = c.train;

  parallel::Communicator& world = parallel::world();
  parallel::ProcessGrid grid(world, grid_shape(c.parallel));
  check_parallel(c, grid, f.config);
  Hooks hooks = make_hooks(c, grid);
  const bool root_rank = grid.is_root();
  if (!f.resume.empty()) {
    t.resume = f.resume == "auto" ? auto_resume_checkpoint(t.run_dir, root_rank) : f.resume;
    if (root_rank) std::fprintf(stderr, "train: resuming from %s\n", t.resume.c_str());
  }
  const int threads = configure_threads(f.threads.value_or(0));
  torch::manual_seed(t.seed);
  UNet net(c.model.options);
  if (root_rank) {
    write_resolved_config(c, grid);
    for (const std::string& note : data.notes) std::fprintf(stderr, "train: %s\n", note.c_str());
    print_plan(c, grid, hooks, threads, net);
  }
  const std::unique_ptr<parallel::DeviceMonitor> monitor = start_monitor(t, world, hooks);
  RunWriter run_writer(t.run_dir);  // core reports; metrics.jsonl and checkpoints/ are written here
  const TrainReport r = [&] {
    const OperatorProfile profile(f.profile, root_rank);
    return train(net, data.pairs, t, meta, hooks.get(), data.validation, &run_writer);
  }();
  monitor->set_phase("done");
  monitor->sample_now();
  print_telemetry_summary(world, *monitor);
  if (root_rank) print_report(r);
  if (root_rank && hooks.data) print_communication(*hooks.data);
  if (root_rank && hooks.spatial && r.steps > 0) {
    const parallel::SpatialDecomposition& d = hooks.spatial->decomposition();
    std::printf("halo exchange: rank 0 sent %.2f MiB per step (forward %.2f, backward %.2f)\n",
                double(d.halo_bytes_forward() + d.halo_bytes_backward()) / r.steps / (1 << 20),
                double(d.halo_bytes_forward()) / r.steps / (1 << 20), double(d.halo_bytes_backward()) / r.steps / (1 << 20));
  }
}

}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a U-Net from a YAML config (flags override the file)");
  static Flags f;
  cmd->add_option("--config", f.config,
                  "YAML file: run_dir, model, data (pairs, class_names, holdout; or dataset: an MSD / nnU-Net folder with "
                  "validation: [case ids] or fold: K, folds: N = every N-th case by id from the K-th), train")
      ->required();
  std::vector<FlagOverrides<RunConfig>::Flag> flags;
  for (const TrainFlag& flag : train_flags()) flags.push_back({flag.key, flag.aliases});
  f.overrides.add_to(cmd, flags);
  cmd->add_option("--threads", f.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_option("--resume", f.resume,
                  "Continue a killed run from a checkpoint (`auto` = RUN/checkpoints/last.pt); the losses after it equal "
                  "an uninterrupted run's");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->add_option("--profile", f.profile,
                  "Write rank 0's operators (forward, backward, optimizer) as a Chrome trace JSON; "
                  "scripts/profile_summary.py FILE prints where the time went");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
