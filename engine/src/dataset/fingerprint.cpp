// fingerprint_dataset (dataset_plan.hpp): an MSD / nnU-Net folder or a training config's pairs;
// every labelled case opened for its extent and spacing, its labels counted slice by slice,
// and the foreground intensities.
#include <cmath>
#include <filesystem>
#include <memory>

#include "tessera/core/error.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/rasterize.hpp"
#include "tessera/io/resample.hpp"

namespace tessera::engine {
namespace {

// Extent and spacing in the extent's axis order: a volume's per LPS axis (as training
// reorients it: flips and axis permutations undone), ITK's (x, y, z) spacing reversed; a
// raster's pixel size.
CaseFingerprint case_fingerprint(const std::string& id, const ImageInfo& info) {
  const auto& g = info.geo;
  if (info.kind == "volume" && info.extent.size() == 3) {
    const io::VolumeGrid grid = io::axis_aligned_grid(io::grid_of(info));
    const std::vector<double>& s = grid.geo.spacing;
    return {id, grid.extent, {s[2], s[1], s[0]}};
  }
  if (!g.spacing.empty())
    return {id, info.extent, std::vector<double>(g.spacing.rbegin(), g.spacing.rbegin() + long(info.extent.size()))};
  if (g.geotransform.size() == 6) return {id, info.extent, {std::abs(g.geotransform[5]), std::abs(g.geotransform[1])}};
  return {id, info.extent, std::vector<double>(info.extent.size(), 1.0)};
}

// Adds each class's voxels of `labels` to `counts`, one slice (row) at a time.
void count_labels(const ImageSource& labels, std::vector<int64_t>& counts) {
  const Index& extent = labels.info().extent;
  Box slice{Index(extent.size(), 0), extent};
  slice.size[0] = 1;
  for (int64_t z = 0; z < extent[0]; ++z) {
    slice.origin[0] = z;
    const Block<float> b = labels.read(slice);
    for (float v : b.data)
      if (std::isfinite(v) && v >= 0 && v < float(counts.size())) ++counts[size_t(v)];
  }
}

// Every case of `cases` into `f`: extent and spacing, class counts, foreground intensities.
void fingerprint_cases(const std::vector<MsdCase>& cases, DatasetFingerprint& f) {
  std::vector<int64_t> counts(f.class_names.size(), 0);
  std::vector<std::unique_ptr<ImageSource>> open;
  std::vector<io::LabelledRegion> regions;
  for (const MsdCase& c : cases) {
    open.push_back(io::open_image(c.image));
    const ImageSource& image = *open.back();
    open.push_back(io::open_image(c.label));
    const ImageSource& labels = *open.back();
    if (labels.info().extent != image.info().extent)
      throw Error(c.label + ": " + to_string(labels.info().extent) + " voxels, its image " + c.image + " " +
                  to_string(image.info().extent));
    f.cases.push_back(case_fingerprint(c.id, image.info()));
    f.dims = static_cast<int>(image.info().extent.size());
    count_labels(labels, counts);
    regions.push_back({&image, &labels, Box{Index(image.info().extent.size(), 0), image.info().extent}});
  }
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  for (int64_t n : counts) f.class_fractions.push_back(total ? double(n) / double(total) : 0.0);
  const io::IntensityStatistics s = io::foreground_statistics(regions).at(0);
  f.fg_low = s.low;
  f.fg_high = s.high;
  f.fg_mean = s.mean;
  f.fg_std = s.std;
  f.fg_voxels = s.voxels;
}

DatasetFingerprint fingerprint_folder(const std::string& folder) {
  const MsdDataset d = read_msd_dataset(folder);
  DatasetFingerprint f;
  f.folder = folder;
  f.name = d.name;
  f.modality = d.channel;
  f.class_names = d.class_names;
  if (d.cases.empty()) throw Error(folder + "/dataset.json: lists no labelled case");
  fingerprint_cases(d.cases, f);
  return f;
}

// A training config: its data.dataset folder, or its data.pairs as the cases (whole images,
// the holdout included), named by data.class_names or model.classes.
DatasetFingerprint fingerprint_config(const std::string& path) {
  const RunConfig c = read_run_config(ConfigFile::load(path));
  if (!c.data.dataset.empty()) return fingerprint_folder(config_relative(path, c.data.dataset));
  DatasetFingerprint f;
  f.folder = path;
  f.name = std::filesystem::path(path).stem().string();
  f.class_names = c.data.class_names;
  for (int k = static_cast<int>(f.class_names.size()); k < c.model.options.classes; ++k)
    f.class_names.push_back("class " + std::to_string(k));
  std::vector<MsdCase> cases;
  for (const PairConfig& p : c.data.pairs) {
    if (io::is_vector_path(p.labels))
      throw Error(p.where + ": " + p.prefix + "labels: " + p.labels +
                  " is polygons; plan --dataset needs label rasters or volumes");
    std::string id = std::filesystem::path(p.image).filename().string();
    id = id.substr(0, id.find('.'));
    cases.push_back({id, config_relative(path, p.image), config_relative(path, p.labels)});
  }
  if (cases.empty()) throw Error(path + ": data.pairs: no image/label pairs (data.source is not planned)");
  fingerprint_cases(cases, f);
  return f;
}

}  // namespace

DatasetFingerprint fingerprint_dataset(const std::string& path) {
  return std::filesystem::is_regular_file(path) ? fingerprint_config(path) : fingerprint_folder(path);
}

}  // namespace tessera::engine
