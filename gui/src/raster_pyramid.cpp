#include "raster_pyramid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/io/label_background.hpp"

namespace tessera::gui {
namespace {

int ceil_shift(int n, int level) { return std::max(1, (n + (1 << level) - 1) >> level); }

// `path`, once GDAL runs with the viewer's cache (so the reader's first use keeps it).
const std::string& with_viewer_cache(const std::string& path) {
  io::init_gdal(kViewerCacheBytes);
  return path;
}

RasterMeta meta_of(const io::RasterReader& reader) {
  const ImageInfo& info = reader.info();
  io::RasterDescription d = reader.describe();
  RasterMeta m;
  m.path = info.path;
  m.width = static_cast<int>(info.extent[1]);
  m.height = static_cast<int>(info.extent[0]);
  m.bands = d.bands;
  m.data_type = info.data_type;
  m.nodata = std::move(d.nodata);
  m.geotransform = info.geo.geotransform;
  m.crs_wkt = info.geo.crs_wkt;
  m.overview_count = d.overview_count;
  m.band_names = std::move(d.band_names);
  m.class_names = std::move(d.class_names);
  m.background = io::label_background(info.path);
  m.color_table = d.color_table;
  return m;
}

}  // namespace

RasterPyramid::RasterPyramid(const std::string& path) : reader_(with_viewer_cache(path)), meta_(meta_of(reader_)) {}

int RasterPyramid::level_width(int level) const { return ceil_shift(meta_.width, level); }
int RasterPyramid::level_height(int level) const { return ceil_shift(meta_.height, level); }

int RasterPyramid::level_count(int tile) const {
  int levels = 1;
  while (std::max(level_width(levels - 1), level_height(levels - 1)) > tile && levels < 24) ++levels;
  return levels;
}

Box RasterPyramid::full_window(int level, int x0, int y0, int w, int h) const {
  const int fx0 = x0 << level, fy0 = y0 << level;
  const int fw = std::min(meta_.width - fx0, w << level), fh = std::min(meta_.height - fy0, h << level);
  if (fw <= 0 || fh <= 0) throw Error(meta_.path + ": tile window outside the raster");
  return Box{{fy0, fx0}, {fh, fw}};
}

LevelBlock RasterPyramid::read(int level, int x0, int y0, int w, int h, const std::vector<int>& bands,
                               bool nearest) const {
  LevelBlock out;
  out.w = w;
  out.h = h;
  out.bands = static_cast<int>(bands.size());
  if (w <= 0 || h <= 0) {
    out.data.assign(size_t(std::max(w, 0)) * size_t(std::max(h, 0)) * bands.size(), 0.0f);
    return out;
  }
  out.data = reader_
                 .read_resampled(full_window(level, x0, y0, w, h), {h, w}, bands,
                                 nearest ? io::Resampling::nearest : io::Resampling::average)
                 .data;
  return out;
}

std::vector<uint8_t> RasterPyramid::read_labels(int level, int x0, int y0, int w, int h) const {
  if (w <= 0 || h <= 0) return {};
  return reader_.read_labels_resampled(full_window(level, x0, y0, w, h), {h, w}).data;
}

std::vector<double> RasterPyramid::read_pixel(int x, int y) const { return reader_.read_pixel(y, x); }

void RasterPyramid::build_overviews(const std::string& path, bool nearest) {
  io::init_gdal(kViewerCacheBytes);
  io::build_overviews(path, nearest ? io::Resampling::nearest : io::Resampling::average);
}

Stretch percentile_stretch(const LevelBlock& block, double low_pct, double high_pct) {
  Stretch s;
  const size_t plane = size_t(block.w) * size_t(block.h);
  for (int c = 0; c < block.bands; ++c) {
    std::vector<float> v;
    v.reserve(plane);
    for (size_t i = 0; i < plane; ++i) {
      const float x = block.data[size_t(c) * plane + i];
      if (std::isfinite(x)) v.push_back(x);
    }
    float lo = 0, hi = 1;
    if (!v.empty()) {
      auto at = [&](double pct) {
        const size_t k = std::min(v.size() - 1, size_t(pct / 100.0 * double(v.size() - 1) + 0.5));
        std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
        return v[k];
      };
      lo = at(low_pct);
      hi = at(high_pct);
      if (!(hi > lo)) hi = lo + 1;
    }
    s.lo.push_back(lo);
    s.hi.push_back(hi);
  }
  return s;
}

std::array<double, 2> pixel_to_map(const std::vector<double>& gt, double x, double y) {
  if (gt.size() != 6) return {x, y};
  return {gt[0] + x * gt[1] + y * gt[2], gt[3] + x * gt[4] + y * gt[5]};
}

}  // namespace tessera::gui
