#pragma once
// What a `tessera train` config file says, declared once (options_binding.hpp): the reader,
// the resolved RUN/config.yaml and the `tessera train` flags all follow fields(RunConfig&).
//   run_dir: runs/scene
//   model: {preset: unet-tiny, classes: 4}          # the preset, then any UNetOptions field
//   data: {pairs: [{image, labels, label_attribute, label_layer}], classes: [{name, color}], background: 0 | none,
//          holdout: {axis, fraction}}
//   data: {dataset: DIR, validation: [case ids] | fold: K, folds: N}   # an MSD / nnU-Net folder (msd_dataset.hpp)
//   train: {TrainOptions fields (train_options_binding.hpp), validate}
//   parallel: {dp, pp, sp, sp_mesh, fusion_mib, overlap_allreduce, gradient_compression, micro_batches, schedule, activation_checkpoint, scale_learning_rate}
// A key nobody declared is an error naming the file, line and closest key (config_file.hpp).
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tessera/engine/config_file.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/engine/train_options_binding.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/dsn_spec.hpp"
#include "tessera/io/rasterize.hpp"

namespace tessera::engine {

/// model: a named preset, then any field overridden; kind dsn makes it the shared U-Net of
/// a Domain Separation Network (dsn_spec.hpp) whose other parts `dsn:` sizes.
struct ModelConfig {
  std::string kind = "unet";
  std::string preset = "unet-tiny";
  UNetOptions options = unet_preset("unet-tiny");
  DsnOptions dsn;
  bool is_dsn() const { return kind == "dsn"; }
};

/// One entry of data.pairs. Paths as the file gives them (relative to the config file).
struct PairConfig {
  std::string image, labels;
  io::RasterizeOptions rasterize;  ///< polygon labels only: label_attribute, label_layer
  std::string where, prefix;       ///< "FILE:LINE" and "data.pairs[i].", for messages (not keys)
};

/// data.source of a DSN: the labelled domain.
struct SourceConfig {
  std::vector<PairConfig> pairs;
};

/// One entry of data.targets: an unlabelled domain's images.
struct TargetConfig {
  std::vector<std::string> images;
  std::string where;  ///< "FILE:LINE", for messages (not a key)
};

/// data.normalization: how intensities become network inputs (core's Normalization).
struct NormalizationConfig {
  /// auto: rasters "raster"; volumes by modality — a dataset's channel name or a DICOM
  /// series' Modality ("CT" → ct, MR and other names → mr), otherwise ct.
  std::string kind = "auto";
  std::vector<double> window;          ///< ct: [low, high] in HU; empty = 0.5 / 99.5 percentiles of the foreground
  std::vector<double> offset, scale;   ///< affine: per channel
  bool mask = false;                   ///< mr: z-score over voxels != 0 only
};

/// data.resample: the voxel grid volumes are trained and inferred on (core's VolumeResampling).
struct ResampleConfig {
  bool enabled = true;          ///< false: every volume on its own grid
  std::vector<double> spacing;  ///< x, y, z in mm; empty = the training cases' median spacing (nnU-Net)
  std::string image = "linear";
  std::string labels = "nearest";
};

/// One entry of data.classes: the class whose label value is its position in the list (from 0).
struct ClassConfig {
  std::string name;
  std::string color;  ///< "#rrggbb"; empty = a default for the name, else for the id (colors.hpp)
  std::string where;  ///< "FILE:LINE", for messages (not a key)
};

/// data.background: "0" (class 0 is background: left out of overlays and polygons, unchecked
/// in the viewer) or "none" (class 0 is a class like any other, e.g. water).
inline const char* const kBackgroundChoices[] = {"0", "none"};

struct DataConfig {
  std::vector<PairConfig> pairs;
  SourceConfig source;                ///< kind dsn: the labelled domain (instead of pairs)
  std::vector<TargetConfig> targets;  ///< kind dsn: the unlabelled domains
  std::vector<std::string> class_names;  ///< the names alone (older spelling); data.classes fills it
  std::vector<ClassConfig> classes;      ///< names and colours, set once for every output
  std::string background = "0";          ///< "0" or "none" (kBackgroundChoices)
  Holdout holdout;
  std::string dataset;                  ///< an MSD / nnU-Net folder (relative to the config file), instead of pairs
  std::vector<std::string> validation;  ///< with dataset: the cases validated on (whole images), never trained on
  int fold = 0;                         ///< with dataset and folds > 0: validate on every folds-th case from this one
  int folds = 0;                        ///< 0: no folds
  NormalizationConfig normalization;
  ResampleConfig resample;
};

/// parallel: the process grid and the parallel modes' knobs.
struct ParallelConfig {
  int dp = 0;  ///< replicas; 0 = ranks / (pp × sp)
  int pp = 1;
  int sp = 1;
  std::string sp_mesh;  ///< blocks per spatial axis with sp > 1 ("2x2"); empty = split along the first axis
  double fusion_mib = 25;
  bool overlap_allreduce = true;  ///< reduce gradient buckets during the backward
  std::string gradient_compression = "none";  ///< none, bf16 or fp16 (gradient_wire in cmd_train.cpp)
  int micro_batches = 0;
  std::string schedule = "1f1b";
  std::string activation_checkpoint = "never";
};

struct RunConfig {
  ModelConfig model;
  TrainOptions train;  ///< run_dir is the top-level key `run_dir`
  bool validate = true;
  ParallelConfig parallel;
  DataConfig data;
  bool in_channels_given = false;  ///< model.in_channels in the file (else taken from the image)
  bool classes_given = false;      ///< model.classes in the file (else data.dataset's label count)
  std::string pairs_where;         ///< "FILE:LINE" of data.pairs (or of the file)
};

// ---- field declarations ---------------------------------------------------------------

template <class V>
void fields(ModelConfig& m, V& v) {
  v.field("kind", m.kind, "unet, or dsn: a Domain Separation Network on data.source and data.targets");
  v.field("preset", m.preset, "Preset the other model fields override (unet-tiny, unet-small, …)");
  fields(m.options, v);
  v.section("dsn", m.dsn, "kind dsn: private encoders, reconstruction decoder, domain classifier, loss weights");
}

template <class V>
void fields(PairConfig& p, V& v) {
  v.field("image", p.image, "Image (GeoTIFF, NIfTI, NRRD, MHA, DICOM series)");
  v.field("labels", p.labels, "Label raster/volume on the image's grid, or polygons (.gpkg, .geojson, .shp)");
  v.field("label_attribute", p.rasterize.attribute, "Polygon labels: the integer field holding the class id");
  v.field("label_layer", p.rasterize.layer, "Polygon labels: the layer; empty = the first");
}

template <class V>
void fields(ClassConfig& k, V& v) {
  v.field("name", k.name, "The class's name; its label value is its position in data.classes, from 0");
  v.field("color", k.color,
          "Its colour as \"#rrggbb\" (quoted: YAML reads # as a comment); empty = a default for the name or the id");
}

template <class V>
void fields(Holdout& h, V& v) {
  v.field("axis", h.axis, "x, y or z; empty = x (2-D) / z (3-D)");
  v.field("fraction", h.fraction, "The last fraction of the axis is never trained on");
}

template <class V>
void fields(SourceConfig& s, V& v) {
  v.list("pairs", s.pairs, "The labelled source domain's {image, labels} pairs");
}

template <class V>
void fields(TargetConfig& t, V& v) {
  v.field("images", t.images, "An unlabelled target domain's images (another sensor, scanner, protocol)");
}

template <class V>
void fields(NormalizationConfig& n, V& v) {
  v.field("kind", n.kind, "auto, affine, raster, ct or mr (auto: rasters raster; volumes by modality, else ct)");
  v.field("window", n.window, "ct: [low, high] HU to clip to; empty = the 0.5 / 99.5 percentiles of the foreground");
  v.field("offset", n.offset, "affine: per-channel offset");
  v.field("scale", n.scale, "affine: per-channel scale");
  v.field("mask", n.mask, "mr: z-score over voxels != 0 only");
}

template <class V>
void fields(ResampleConfig& r, V& v) {
  v.field("enabled", r.enabled, "Resample volumes to one spacing (false: each on its own grid)");
  v.field("spacing", r.spacing, "Target spacing x, y, z in mm; empty = the training cases' median");
  v.field("image", r.image, "Image interpolation: linear or nearest");
  v.field("labels", r.labels, "Label interpolation: nearest (class ids are never mixed)");
}

template <class V>
void fields(DataConfig& d, V& v) {
  v.section("normalization", d.normalization, "Intensity normalisation, stored in checkpoints");
  v.section("resample", d.resample, "Volumes: the spacing training and inference run at");
  v.section("holdout", d.holdout, "The held-back area");
  v.field("class_names", d.class_names, "One name per class (or data.classes, which also sets colours)");
  v.list("classes", d.classes,
         "One {name, color} per label value 0, 1, ...: the names and colours every output, legend and report uses "
         "(stored in the checkpoint)");
  v.field("background", d.background,
          "0: class 0 is background (not drawn on overlays, no polygons, unchecked in the viewer); none: class 0 is a "
          "class like any other (e.g. water)");
  v.list("pairs", d.pairs, "{image, labels} pairs");
  v.section("source", d.source, "kind dsn: the labelled domain");
  v.list("targets", d.targets, "kind dsn: the unlabelled domains, each {images: [...]}");
  v.field("dataset", d.dataset,
          "A Medical Segmentation Decathlon / nnU-Net folder (dataset.json, imagesTr, labelsTr) instead of pairs; "
          "class_names default to its labels");
  v.field("validation", d.validation, "With dataset: case ids validated on as whole images, never trained on");
  v.field("fold", d.fold, "With dataset and folds: validate on fold K = every N-th case (sorted by id) from the K-th");
  v.field("folds", d.folds,
          "With dataset: N folds (0: none); a fixed split by id order, not nnU-Net's random splits_final.json");
}

/// train: is TrainOptions plus `validate`; a view made inside fields(RunConfig&).
struct TrainSection {
  TrainOptions& options;
  bool& validate;
};
template <class V>
void fields(TrainSection& s, V& v) {
  fields(s.options, v);
  v.field("validate", s.validate, "Per-class Dice on the holdout after every epoch (best.pt)");
}

/// parallel: also accepts scale_learning_rate (the same field as train.scale_learning_rate).
struct ParallelSection {
  ParallelConfig& p;
  bool& scale_learning_rate;
};
template <class V>
void fields(ParallelSection& s, V& v) {
  v.field("dp", s.p.dp, "Data-parallel replicas (default: ranks / (pp x sp))");
  v.field("pp", s.p.pp, "Pipeline stages: the U-Net cut into this many stages by the memory-aware balance");
  v.field("sp", s.p.sp, "Spatial ranks per tile: each holds one block of every tile (needs padding same)");
  v.field("sp_mesh", s.p.sp_mesh, "Blocks per spatial axis with --sp, e.g. 2x2 (product = sp); empty = split along the first axis");
  v.field("fusion_mib", s.p.fusion_mib, "Gradient allreduce bucket bound in MiB");
  v.field("overlap_allreduce", s.p.overlap_allreduce,
          "Reduce gradient buckets during the backward (hooks, non-blocking allreduce); false: all after it");
  v.field("gradient_compression", s.p.gradient_compression,
          "Gradients on the wire: none (fp32, exact), bf16 or fp16 (half the bytes, error feedback; not exact)");
  v.field("micro_batches", s.p.micro_batches, "Micro-batches per replica batch with --pp (0: one tile each)");
  v.field("schedule", s.p.schedule, "Pipeline schedule with --pp: 1f1b or gpipe");
  v.field("activation_checkpoint", s.p.activation_checkpoint,
          "Activation checkpointing with --pp: never, always, except_last (recompute, same result)");
  v.field("scale_learning_rate", s.scale_learning_rate,
          "Multiply the learning rate by the replicas (default off: exact equivalence)");
}

template <class V>
void fields(RunConfig& c, V& v) {
  v.field("run_dir", c.train.run_dir, "Where metrics.jsonl, config.yaml and checkpoints/ go");
  v.section("model", c.model, "The U-Net");
  TrainSection train{c.train, c.validate};
  v.section("train", train, "Training");
  ParallelSection parallel{c.parallel, c.train.scale_learning_rate};
  v.section("parallel", parallel, "Parallel training");
  v.section("data", c.data, "Image/label pairs, class names, holdout");
}

// ---- reading and writing ---------------------------------------------------------------

/// Reads a whole config: every declared key, then rejects unknown keys, then requires
/// data.pairs or data.dataset (not both). Throws tessera::Error "FILE:LINE: …".
RunConfig read_run_config(const ConfigFile& file);

/// data.dataset's label names as data.class_names (and model.classes unless given); a
/// data.class_names the file gives must have as many. `where` prefixes the error.
void take_dataset_classes(RunConfig& c, const std::vector<std::string>& dataset_classes, const std::string& where);

/// The colour of every class (data.classes' colours, else default_class_color of its name),
/// `classes` of them, named as `names` gives them. Throws naming data.classes when it lists
/// another number of classes than `classes`.
std::vector<Rgb> resolve_class_colors(const DataConfig& d, const std::vector<std::string>& names, int classes,
                                      const std::string& where);

/// The resolved configuration: every declared field, defaults included; reading it back
/// gives the same RunConfig.
std::string resolved_config_yaml(const RunConfig& c);

/// The config keys `tessera train` also takes as flags (--<key with dashes>), with the
/// older short spellings kept as aliases: "train.learning_rate" → --learning-rate, --lr.
struct TrainFlag {
  const char* key;
  const char* aliases;  ///< "" or "--lr"
};
const std::vector<TrainFlag>& train_flags();

}  // namespace tessera::engine
