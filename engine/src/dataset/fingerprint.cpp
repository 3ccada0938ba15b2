// fingerprint_dataset (dataset_plan.hpp): every labelled case opened for its extent and
// spacing, its labels counted slice by slice, and the foreground intensities.
#include <cmath>
#include <memory>

#include "tessera/core/error.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::engine {
namespace {

// Spacing in the extent's axis order: a volume's ITK (x, y, z) reversed, a raster's pixel size.
std::vector<double> spacing_of(const ImageInfo& info) {
  const auto& g = info.geo;
  if (!g.spacing.empty()) return std::vector<double>(g.spacing.rbegin(), g.spacing.rbegin() + long(info.extent.size()));
  if (g.geotransform.size() == 6) return {std::abs(g.geotransform[5]), std::abs(g.geotransform[1])};
  return std::vector<double>(info.extent.size(), 1.0);
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

}  // namespace

DatasetFingerprint fingerprint_dataset(const std::string& folder) {
  const MsdDataset d = read_msd_dataset(folder);
  DatasetFingerprint f;
  f.folder = folder;
  f.name = d.name;
  f.modality = d.channel;
  f.class_names = d.class_names;
  std::vector<int64_t> counts(d.class_names.size(), 0);
  std::vector<std::unique_ptr<ImageSource>> open;
  std::vector<io::LabelledRegion> regions;
  for (const MsdCase& c : d.cases) {
    open.push_back(io::open_image(c.image));
    const ImageSource& image = *open.back();
    open.push_back(io::open_image(c.label));
    const ImageSource& labels = *open.back();
    if (labels.info().extent != image.info().extent)
      throw Error(c.label + ": " + to_string(labels.info().extent) + " voxels, its image " + c.image + " " +
                  to_string(image.info().extent));
    f.cases.push_back({c.id, image.info().extent, spacing_of(image.info())});
    f.dims = static_cast<int>(image.info().extent.size());
    count_labels(labels, counts);
    regions.push_back({&image, &labels, Box{Index(image.info().extent.size(), 0), image.info().extent}});
  }
  if (f.cases.empty()) throw Error(folder + "/dataset.json: lists no labelled case");
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

}  // namespace tessera::engine
