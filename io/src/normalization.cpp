#include "tessera/io/normalization.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

Box whole(const ImageSource& image) {
  const Index& extent = image.info().extent;
  return Box{Index(extent.size(), 0), extent};
}

// The p-th percentile (0..100) of `v` by linear interpolation between order statistics, as
// numpy's default; reorders `v`.
double percentile(std::vector<float>& v, double p) {
  TESSERA_CHECK(!v.empty());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double a = v[lo];
  if (hi == lo) return a;
  const double b = *std::min_element(v.begin() + lo + 1, v.end());  // the next order statistic
  return a + (rank - double(lo)) * (b - a);
}

// Mean and population standard deviation of `v` clipped to [low, high] (double sums).
std::pair<double, double> clipped_moments(const std::vector<float>& v, double low, double high) {
  double sum = 0, sum2 = 0;
  for (float x : v) {
    const double c = std::clamp(double(x), low, high);
    sum += c;
    sum2 += c * c;
  }
  const double n = double(v.size());
  const double mean = sum / n;
  return {mean, std::sqrt(std::max(0.0, sum2 / n - mean * mean))};
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

void ForegroundStatisticsOptions::validate() const {
  if (!(0 <= low_percentile && low_percentile < high_percentile && high_percentile <= 100))
    throw Error("foreground statistics: percentiles must satisfy 0 <= low < high <= 100, got " +
                std::to_string(low_percentile) + " and " + std::to_string(high_percentile));
  if (max_voxels_per_image < 1)
    throw Error("foreground statistics: max_voxels_per_image must be >= 1, got " + std::to_string(max_voxels_per_image));
  if (window && !(window->first < window->second))
    throw Error("foreground statistics: window must be [low, high] with low < high");
}

std::vector<IntensityStatistics> foreground_statistics(const std::vector<LabelledRegion>& pairs,
                                                       const ForegroundStatisticsOptions& o) {
  TESSERA_CHECK(!pairs.empty());
  o.validate();
  const int channels = pairs.front().image->info().channels;
  std::vector<std::vector<float>> values(channels);
  std::vector<int> images(channels, 0);
  for (const auto& [image, labels, region] : pairs) {
    if (image->info().extent != labels->info().extent)
      throw Error(labels->info().path + ": label size " + to_string(labels->info().extent) + " differs from image size " +
                  to_string(image->info().extent) + " of " + image->info().path);
    if (image->info().channels != channels)
      throw Error(image->info().path + ": has " + std::to_string(image->info().channels) + " channels, the first image " +
                  std::to_string(channels));
    const Block<float> x = image->read(region);
    const Block<float> y = labels->read(region);
    const int64_t n = static_cast<int64_t>(y.data.size());
    std::vector<int64_t> foreground;
    for (int64_t i = 0; i < n; ++i)
      if (y.data[i] > 0) foreground.push_back(i);  // NaN compares false: nodata is not foreground
    if (foreground.empty()) continue;
    // An even stride keeps at most max_voxels_per_image, the same ones on every run.
    const int64_t stride = std::max<int64_t>(1, (int64_t(foreground.size()) + o.max_voxels_per_image - 1) /
                                                    std::max<int64_t>(1, o.max_voxels_per_image));
    for (int c = 0; c < channels; ++c) {
      bool any = false;
      for (size_t k = 0; k < foreground.size(); k += static_cast<size_t>(stride)) {
        const float v = x.data[c * n + foreground[k]];
        if (std::isfinite(v)) {
          values[c].push_back(v);
          any = true;
        }
      }
      images[c] += any ? 1 : 0;
    }
  }
  std::vector<IntensityStatistics> stats(channels);
  for (int c = 0; c < channels; ++c) {
    if (values[c].empty())
      throw Error(pairs.front().labels->info().path + ": no foreground (label > 0) in any training case; CT statistics "
                  "need labelled voxels (or give normalization.kind affine with offset and scale)");
    IntensityStatistics& s = stats[c];
    s.voxels = static_cast<int64_t>(values[c].size());
    s.images = images[c];
    if (o.window) {
      s.low = o.window->first;
      s.high = o.window->second;
    } else {
      s.low = percentile(values[c], o.low_percentile);
      s.high = percentile(values[c], o.high_percentile);
    }
    std::tie(s.mean, s.std) = clipped_moments(values[c], s.low, s.high);
    if (!(s.std > 1e-6)) s.std = 1;  // a constant foreground: centre it, do not divide by ~0
  }
  return stats;
}

Normalization ct_normalization(const std::vector<IntensityStatistics>& stats) {
  Normalization n;
  n.kind = "ct";
  for (const IntensityStatistics& s : stats) {
    n.clip_low.push_back(static_cast<float>(s.low));
    n.clip_high.push_back(static_cast<float>(s.high));
    n.offset.push_back(static_cast<float>(s.mean));
    n.scale.push_back(static_cast<float>(s.std));
  }
  return n;
}

Normalization resolve_normalization(const Normalization& spec, const ImageSource& image) {
  if (spec.kind == "raster" && !spec.resolved()) {
    const auto* raster = dynamic_cast<const RasterReader*>(&image);
    if (!raster) throw Error(image.info().path + ": raster normalisation (per-band statistics) needs a raster");
    Normalization n = raster->band_statistics();
    n.kind = "raster";
    return n;
  }
  if (spec.kind != "mr") return spec;
  const Block<float> x = image.read(whole(image));
  const int channels = image.info().channels;
  const int64_t n = static_cast<int64_t>(x.data.size()) / channels;
  Normalization out = spec;
  out.offset.clear();
  out.scale.clear();
  for (int c = 0; c < channels; ++c) {
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x.data[c * n + i];
      if (!std::isfinite(v) || (spec.mask && v == 0)) continue;
      sum += v;
      sum2 += v * v;
      ++count;
    }
    const double mean = count ? sum / double(count) : 0;
    const double sd = count ? std::sqrt(std::max(0.0, sum2 / double(count) - mean * mean)) : 0;
    if (count == 0 || !(sd > 1e-6))
      throw Error(image.info().path + ": channel " + std::to_string(c) + " is constant" +
                  (spec.mask ? " (or empty) inside its non-zero mask" : "") + "; an MR z-score has nothing to scale by");
    out.offset.push_back(static_cast<float>(mean));
    out.scale.push_back(static_cast<float>(sd));
  }
  return out;
}

namespace {

// A bounded sample of `image` as (channels, ...): a raster's preview, a volume's slices.
Block<float> intensity_sample(const ImageSource& image) {
  if (const auto* raster = dynamic_cast<const RasterReader*>(&image)) return raster->read_preview(1024);
  const Index& extent = image.info().extent;
  const int64_t slices = std::min<int64_t>(extent[0], 32);
  Index slab = extent;
  slab[0] = 1;
  const int channels = image.info().channels;
  const int64_t per_slice = slab.size() > 1 ? Box{Index(extent.size(), 0), slab}.count() : 1;
  Block<float> out(Index{channels, slices * per_slice});
  for (int64_t k = 0; k < slices; ++k) {
    Index origin(extent.size(), 0);
    origin[0] = (2 * k + 1) * extent[0] / (2 * slices);  // the middle of the k-th of `slices` equal parts
    const Block<float> x = image.read(Box{origin, slab});
    for (int c = 0; c < channels; ++c)
      std::copy_n(x.data.begin() + c * per_slice, per_slice, out.data.begin() + (c * slices + k) * per_slice);
  }
  return out;
}

}  // namespace

std::vector<IntensityRange> intensity_ranges(const ImageSource& image) {
  const Block<float> x = intensity_sample(image);
  const int channels = image.info().channels;
  const size_t n = x.data.size() / size_t(channels);
  std::vector<IntensityRange> out;
  for (int c = 0; c < channels; ++c) {
    std::vector<float> finite;
    const size_t stride = std::max<size_t>(1, n / 1000000);  // at most about a million values
    for (size_t i = 0; i < n; i += stride)
      if (std::isfinite(x.data[size_t(c) * n + i])) finite.push_back(x.data[size_t(c) * n + i]);
    if (finite.empty()) {
      out.push_back({std::nan(""), std::nan("")});
      continue;
    }
    const double low = percentile(finite, 1);
    out.push_back({low, percentile(finite, 99)});
  }
  return out;
}

std::string describe(const Normalization& norm) {
  std::string s = norm.kind + ":";
  if (norm.kind == "mr" && !norm.resolved())
    return s + " per-image z-score" + (norm.mask ? " inside the non-zero mask" : "");
  for (size_t c = 0; c < norm.offset.size(); ++c) {
    if (norm.offset.size() > 1) s += " [" + std::to_string(c) + "]";
    if (c < norm.clip_low.size()) s += " clip [" + number(norm.clip_low[c]) + ", " + number(norm.clip_high[c]) + "],";
    s += " offset " + number(norm.offset[c]) + ", scale " + number(norm.scale[c]) + (c + 1 < norm.offset.size() ? ";" : "");
  }
  return s;
}

}  // namespace tessera::io
