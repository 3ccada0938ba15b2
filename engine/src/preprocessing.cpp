#include "tessera/engine/preprocessing.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "tessera/core/error.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/resample.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::engine {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool is_volume(const ImageSource& image) { return image.info().kind == "volume"; }

// kind auto: rasters by band statistics; volumes by modality (CT unless told otherwise).
std::string auto_kind(const ImageSource& first, const std::string& modality) {
  if (!is_volume(first)) return "raster";
  const std::string m = upper(modality);
  return m.empty() || m == "CT" ? "ct" : "mr";
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string volume_modality(const ImageSource& image) {
  if (const auto* v = dynamic_cast<const io::VolumeReader*>(&image))
    if (v->dicom()) return upper(v->dicom()->series.modality);
  return {};
}

Normalization choose_normalization(const NormalizationConfig& config, const std::vector<io::LabelledRegion>& training,
                                   const std::string& modality, const std::string& where, std::string& report) {
  TESSERA_CHECK(!training.empty());
  const ImageSource& first = *training.front().image;
  const int channels = first.info().channels;
  const std::string kind = config.kind == "auto" ? auto_kind(first, modality) : config.kind;
  auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(where + ": data.normalization." + key + ": " + why);
  };
  NormalizationConfig resolved = config;
  resolved.kind = kind;
  validate(resolved, where);
  Normalization n;
  if (kind == "affine") {
    if (static_cast<int>(config.offset.size()) != channels || static_cast<int>(config.scale.size()) != channels)
      bad("offset", "affine needs offset and scale with one value per channel (" + std::to_string(channels) + ")");
    for (int c = 0; c < channels; ++c) {
      if (!std::isfinite(config.offset[c])) bad("offset", "must be finite, got " + fmt(config.offset[c]));
      if (!(config.scale[c] > 0) || !std::isfinite(config.scale[c]))
        bad("scale", "must be positive and finite, got " + fmt(config.scale[c]));
      n.offset.push_back(static_cast<float>(config.offset[c]));
      n.scale.push_back(static_cast<float>(config.scale[c]));
    }
    n.kind = "affine";
  } else if (kind == "raster") {
    if (is_volume(first)) bad("kind", "raster (per-band statistics) is for rasters; " + first.info().path + " is a volume");
    Normalization raster;
    raster.kind = "raster";
    n = io::resolve_normalization(raster, first);
  } else if (kind == "ct") {
    io::ForegroundStatisticsOptions o;
    if (!config.window.empty()) o.window = std::make_pair(config.window[0], config.window[1]);
    const std::vector<io::IntensityStatistics> stats = io::foreground_statistics(training, o);
    n = io::ct_normalization(stats);
    report = "CT normalisation from " + std::to_string(stats.front().voxels) + " foreground voxels of " +
             std::to_string(stats.front().images) + " of " + std::to_string(training.size()) + " training images: " +
             io::describe(n) + (config.window.empty() ? " (clip: 0.5 / 99.5 percentiles)" : " (clip: window)");
    return n;
  } else if (kind == "mr") {
    n.kind = "mr";
    n.mask = config.mask;
  }
  report = "normalisation " + io::describe(n);
  return n;
}

void validate(const NormalizationConfig& config, const std::string& where) {
  auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(where + ": data.normalization." + key + ": " + why);
  };
  const std::string& kind = config.kind;
  if (kind != "auto" && kind != "affine" && kind != "raster" && kind != "ct" && kind != "mr")
    bad("kind", "'" + kind + "' is not one of auto, affine, raster, ct, mr");
  if (kind != "affine" && (!config.offset.empty() || !config.scale.empty()))
    bad("offset", "offset and scale are for kind affine (this is " + kind + ")");
  if (kind != "ct" && kind != "auto" && !config.window.empty())
    bad("window", "a window is for kind ct (this is " + kind + ")");
  if (!config.window.empty() && (config.window.size() != 2 || !(config.window[0] < config.window[1])))
    bad("window", "must be [low, high] with low < high");
  if (kind != "mr" && kind != "auto" && config.mask) bad("mask", "mask is for kind mr (this is " + kind + ")");
}

void validate(const ResampleConfig& config, const std::string& where) {
  auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(where + ": data.resample." + key + ": " + why);
  };
  if (config.image != "linear" && config.image != "nearest")
    bad("image", "'" + config.image + "' is not linear or nearest");
  if (config.labels != "nearest")  // interpolating class ids would invent classes in between
    bad("labels", "'" + config.labels + "': labels are resampled by nearest neighbour only");
  if (!config.spacing.empty() && config.spacing.size() != 3) bad("spacing", "needs 3 values (x, y, z in mm)");
  for (double s : config.spacing)
    if (!(s > 0) || !std::isfinite(s)) bad("spacing", "must be positive and finite, got " + fmt(s));
}

VolumeResampling choose_resampling(const ResampleConfig& config, const std::vector<const ImageSource*>& images,
                                   const std::string& where) {
  auto bad = [&](const std::string& key, const std::string& why) {
    throw Error(where + ": data.resample." + key + ": " + why);
  };
  validate(config, where);
  VolumeResampling r;
  r.image = config.image;
  r.labels = config.labels;
  if (!images.empty() && !is_volume(*images.front())) {
    // Every data.resample key left at its default (train_settings.hpp refused_for_rasters).
    const ResampleConfig defaults;
    const std::string raster = "resampling is for volumes; " + images.front()->info().path + " is a raster";
    if (config.enabled != defaults.enabled) bad("enabled", raster);
    if (!config.spacing.empty()) bad("spacing", raster);
    if (config.image != defaults.image) bad("image", raster);
    return r;
  }
  if (!config.enabled || images.empty()) return r;
  if (!config.spacing.empty()) {
    r.spacing = config.spacing;
    return r;
  }
  // nnU-Net's default target: the median spacing of the training cases, per axis.
  std::vector<std::vector<double>> axes(3);
  for (const ImageSource* image : images) {
    const io::VolumeGrid g = io::axis_aligned_grid(io::grid_of(image->info()));  // spacing per LPS axis
    for (int a = 0; a < 3; ++a) axes[a].push_back(g.geo.spacing[a]);
  }
  for (auto& v : axes) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    r.spacing.push_back(n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
  }
  return r;
}

std::unique_ptr<ImageSource> to_network_grid(const ImageSource& image, const VolumeResampling& resampling,
                                             bool is_labels) {
  if (!resampling.enabled() || !is_volume(image)) return nullptr;
  const io::VolumeGrid grid = io::grid_of(image.info());
  // Reoriented first (LPS, identity direction), so that every case's array reads the same way.
  const io::VolumeGrid target = io::resampled_grid(io::axis_aligned_grid(grid), resampling.spacing);
  if (target == grid) return nullptr;
  return io::resample_volume(image, target, io::parse_interpolation(is_labels ? resampling.labels : resampling.image));
}

std::string describe(const VolumeResampling& r) {
  if (!r.enabled()) return "off";
  return fmt(r.spacing[0]) + " x " + fmt(r.spacing[1]) + " x " + fmt(r.spacing[2]) + " mm (images " + r.image +
         ", labels " + r.labels + ")";
}

}  // namespace tessera::engine
