// fingerprint_dataset / fingerprint_cases (dataset_plan.hpp): an MSD / nnU-Net folder or a
// training config's pairs; every labelled case opened for its extent and spacing, its labels
// counted slice by slice, and the foreground intensities.
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "tessera/core/error.hpp"
#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/resample.hpp"

namespace tessera::engine {
namespace {

// A case as training sees it: `region` (null: the whole) taken on its extent in training's
// axis order, that region's extent and spacing, and the file's voxels it covers. A volume
// `reoriented` as training reorients it (flips and axis permutations undone, ITK's (x, y, z)
// spacing reversed) has its region chosen on the LPS-ordered extent and read back from the
// file's own order; otherwise (a raster: pixel size) the file's order is training's.
struct MeasuredCase {
  CaseFingerprint fingerprint;
  Box box;  // in the file's voxels
};

MeasuredCase measure_case(const std::string& id, const ImageInfo& info, const std::function<Box(const Index&)>& region,
                          bool reoriented) {
  const auto chosen = [&](const Index& extent) { return region ? region(extent) : Box{Index(extent.size(), 0), extent}; };
  if (reoriented && info.kind == "volume" && info.extent.size() == 3) {
    const io::VolumeGrid grid = io::grid_of(info), aligned = io::axis_aligned_grid(grid);
    const Box box = chosen(aligned.extent);
    const std::vector<double>& s = aligned.geo.spacing;
    return {{id, box.size, {s[2], s[1], s[0]}}, io::box_from_axis_aligned(grid, box)};
  }
  const Box box = chosen(info.extent);
  const auto& g = info.geo;
  if (!g.spacing.empty())
    return {{id, box.size, std::vector<double>(g.spacing.rbegin(), g.spacing.rbegin() + long(info.extent.size()))}, box};
  if (g.geotransform.size() == 6) return {{id, box.size, {std::abs(g.geotransform[5]), std::abs(g.geotransform[1])}}, box};
  return {{id, box.size, std::vector<double>(info.extent.size(), 1.0)}, box};
}

// Adds each class's voxels of `labels` inside `region` to `counts`, one slice (row) at a time.
void count_labels(const ImageSource& labels, const Box& region, std::vector<int64_t>& counts) {
  Box slice = region;
  slice.size[0] = 1;
  for (int64_t z = region.origin[0]; z < region.origin[0] + region.size[0]; ++z) {
    slice.origin[0] = z;
    const Block<float> b = labels.read(slice);
    for (float v : b.data)
      if (std::isfinite(v) && v >= 0 && v < float(counts.size())) ++counts[size_t(v)];
  }
}

}  // namespace

DatasetFingerprint fingerprint_cases(const std::string& folder, const std::vector<MsdCase>& cases,
                                     const std::vector<std::string>& class_names,
                                     const std::function<Box(const Index&)>& region, bool reoriented) {
  DatasetFingerprint f;
  f.folder = folder;
  f.class_names = class_names;
  std::vector<int64_t> counts(class_names.size(), 0);
  std::vector<std::unique_ptr<ImageSource>> open;
  std::vector<io::LabelledRegion> regions;
  for (const MsdCase& c : cases) {
    open.push_back(io::open_image(c.image));
    const ImageSource& image = *open.back();
    open.push_back(io::open_image(c.label));
    const ImageSource& labels = *open.back();
    const Index& extent = image.info().extent;
    if (labels.info().extent != extent)
      throw Error(c.label + ": " + to_string(labels.info().extent) + " voxels, its image " + c.image + " " + to_string(extent));
    const MeasuredCase measured = measure_case(c.id, image.info(), region, reoriented);
    if (f.modality.empty()) f.modality = volume_modality(image);
    f.cases.push_back(measured.fingerprint);
    f.dims = static_cast<int>(extent.size());
    count_labels(labels, measured.box, counts);
    regions.push_back({&image, &labels, measured.box});
  }
  if (f.cases.empty()) throw Error(folder + ": no labelled case");
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  for (int64_t n : counts) f.class_fractions.push_back(total ? double(n) / double(total) : 0.0);
  const io::IntensityStatistics s = io::foreground_statistics(regions).at(0);
  f.fg_low = s.low;
  f.fg_high = s.high;
  f.fg_mean = s.mean;
  f.fg_std = s.std;
  f.fg_voxels = s.voxels;
  return f;
}

DatasetFingerprint fingerprint_dataset(const std::string& path) {
  // A training config: its data.dataset folder, or its data.pairs on their training regions.
  if (std::filesystem::is_regular_file(path)) return fingerprint_run_data(read_run_config(ConfigFile::load(path)), path);
  const std::string& folder = path;
  const MsdDataset d = read_msd_dataset(folder);
  if (d.cases.empty()) throw Error(folder + "/dataset.json: lists no labelled case");
  DatasetFingerprint f = fingerprint_cases(folder, d.cases, d.class_names, nullptr);
  f.name = d.name;
  f.modality = d.channel;
  return f;
}

}  // namespace tessera::engine
