#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <limits>

#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/io/hausdorff.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/rasterize.hpp"

namespace tessera::engine::train {
namespace {

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

}  // namespace

Dataset open_pairs(const RunConfig& c, const std::string& config) {
  Dataset d;
  std::vector<OpenedPair> opened;
  for (const PairConfig& p : c.data.pairs)
    opened.push_back(open_pair(
        d, config_relative(config, p.image),
        [&](const ImageSource& image) { return label_raster(c, p, config_relative(config, p.labels), image); },
        OpenedPair::kHoldout));
  place_pairs(c, d, opened, config);
  return d;
}

// data.dataset: its cases as pairs, the validation cases (data.validation, or fold K of N:
// every N-th case by id from the K-th) as whole-image validation pairs, its labels as the
// class names, its channel name as the modality.
Dataset open_dataset(RunConfig& c, const std::string& config) {
  const MsdDataset msd = read_msd_dataset(config_relative(config, c.data.dataset));
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
  d.validation_cases = split.validation;
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

namespace {

// What the training images look like (modality, intensity range, pixel size), stored so that
// inference can say when an input differs.
TrainingInputs describe_inputs(const Dataset& data) {
  TrainingInputs in;
  in.modality = data.modality;
  for (const TrainingPair& p : data.pairs) {
    const std::vector<io::IntensityRange> ranges = io::intensity_ranges(*p.image);
    in.low.resize(ranges.size(), std::numeric_limits<double>::infinity());
    in.high.resize(ranges.size(), -std::numeric_limits<double>::infinity());
    for (size_t c = 0; c < ranges.size() && c < in.low.size(); ++c) {
      if (!std::isfinite(ranges[c].low)) continue;
      in.low[c] = std::min(in.low[c], ranges[c].low);
      in.high[c] = std::max(in.high[c], ranges[c].high);
    }
  }
  if (!data.pairs.empty()) {
    const io::GridSpacing spacing = io::grid_spacing(data.pairs.front().image->info());
    in.spacing = spacing.step;
    in.spacing_unit = spacing.unit;
  }
  return in;
}

}  // namespace

// The model as the data makes it (channels and dimensions of the first image) and the
// description every checkpoint carries (normalisation and resampling included).
CheckpointMeta describe_model(RunConfig& c, Dataset& data, const std::string& config) {
  UNetOptions& model = c.model.options;
  const ImageSource& first = *data.pairs.front().image;
  if (!c.in_channels_given) model.in_channels = first.info().channels;
  model.dims = static_cast<int>(first.info().extent.size());
  CheckpointMeta meta;
  meta.class_colors = resolve_class_colors(c.data, c.data.class_names, model.classes, config);
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
  meta.background = c.data.background;
  meta.inputs = describe_inputs(data);
  data.notes.push_back(describe_classes(meta.class_names, meta.class_colors, meta.background));
  return meta;
}

}  // namespace tessera::engine::train
