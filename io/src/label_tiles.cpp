#include "tessera/io/label_tiles.hpp"

#include <cmath>
#include <filesystem>

#include <cpl_error.h>
#include <gdal.h>
#include <gdal_utils.h>

#include "gdal_error.hpp"
#include "label_output.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/mosaic.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

bool is_raster(const ImageInfo& like) { return like.kind != "volume"; }

// The georeference of a sub-image whose first pixel is `origin` (y, x) or (z, y, x).
Georeference shifted(const Georeference& geo, const Index& origin, bool raster) {
  Georeference g = geo;
  if (raster) {
    if (g.geotransform.size() == 6) {
      const double y = double(origin[0]), x = double(origin[1]);
      g.geotransform[0] += x * geo.geotransform[1] + y * geo.geotransform[2];
      g.geotransform[3] += x * geo.geotransform[4] + y * geo.geotransform[5];
    }
    return g;
  }
  if (g.origin.size() == 3 && g.spacing.size() == 3 && g.direction.size() == 9) {
    const double idx[3] = {double(origin[2]), double(origin[1]), double(origin[0])};  // x, y, z
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) g.origin[r] += geo.direction[3 * r + c] * geo.spacing[c] * idx[c];
  }
  return g;
}

bool close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-6 * std::max(1.0, std::abs(b[i]))) return false;
  return true;
}

// The insets cover the image once (the grid's promise); a gap would be silent nodata in the VRT.
void check_coverage(const std::string& vrt, const std::vector<Box>& insets, const ImageInfo& like) {
  int64_t covered = 0;
  for (const Box& inset : insets) covered += inset.clipped(like.extent).count();
  const int64_t pixels = Box{Index(like.extent.size(), 0), like.extent}.count();
  if (covered != pixels)
    throw Error(vrt + ": tiles cover " + std::to_string(covered) + " of " + std::to_string(pixels) +
                " pixels of " + to_string(like.extent));
}

// The tiles' VRT (kept as <tiles dir>/mosaic.vrt) translated to one GeoTIFF at `output`.
void assemble_raster(const std::vector<std::string>& tiles, const std::vector<Box>& insets, const std::string& output,
                     const ImageInfo& like, const LabelStyle& style) {
  style.validate();
  init_gdal();
  StagedFile vrt(TileSetLayout(fs::path(tiles.front()).parent_path().string()).mosaic());
  check_coverage(vrt.final_path(), insets, like);
  build_mosaic_vrt(vrt.path(), tiles, like);
  CPLErrorReset();
  GDALDatasetH v = GDALOpen(vrt.path().c_str(), GA_ReadOnly);
  if (!v) throw Error(vrt.final_path() + ": cannot open the tile mosaic: " + detail::gdal_error());
  // Same layout as LabelRasterWriter's single-process output.
  const char* argv[] = {"-of", "GTiff", "-co", "TILED=YES", "-co", "BLOCKXSIZE=256", "-co", "BLOCKYSIZE=256",
                        "-co", "COMPRESS=DEFLATE", "-co", "BIGTIFF=IF_SAFER", nullptr};
  GDALTranslateOptions* options = GDALTranslateOptionsNew(const_cast<char**>(argv), nullptr);
  StagedFile out(output);
  int usage = 0;
  GDALDatasetH translated = GDALTranslate(out.path().c_str(), v, options, &usage);
  GDALTranslateOptionsFree(options);
  GDALClose(v);
  if (!translated) throw Error(output + ": cannot write the mosaic: " + detail::gdal_error());
  GDALClose(translated);
  vrt.commit();
  detail::publish_label_raster(out, style, detail::count_labels(out.path(), output));
}

}  // namespace

std::string label_tile_path(const std::string& dir, const ImageInfo& like, int64_t index) {
  return TileSetLayout(dir).tile(index, is_raster(like) ? ".tif" : ".nrrd");
}

void write_label_tile(const std::string& path, const ImageInfo& like, const Box& inset, const Block<uint8_t>& labels) {
  ImageInfo sub = like;
  sub.extent = inset.size;
  sub.geo = shifted(like.geo, inset.origin, is_raster(like));
  auto sink = create_label_sink(path, sub, LabelStyle::bare());
  sink->write(Box{Index(inset.dims(), 0), inset.size}, labels);
  sink->commit();
}

bool label_tile_valid(const std::string& path, const ImageInfo& like, const Box& inset) {
  if (!fs::is_regular_file(path)) return false;
  try {
    auto tile = open_image(path);
    const ImageInfo& info = tile->info();
    if (info.extent != inset.size || info.channels != 1) return false;
    const Georeference expect = shifted(like.geo, inset.origin, is_raster(like));
    if (is_raster(like) ? !close(info.geo.geotransform, expect.geotransform) : !close(info.geo.origin, expect.origin))
      return false;
    tile->read(Box{Index(inset.dims(), 0), inset.size});  // every block decodes
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void assemble_label_tiles(const std::vector<std::string>& tiles, const std::vector<Box>& insets,
                          const std::string& output, const ImageInfo& like, const LabelStyle& style) {
  TESSERA_CHECK(tiles.size() == insets.size());
  if (tiles.empty()) throw Error(output + ": no tiles to assemble");
  if (is_raster(like) && like.geo.geotransform.size() == 6) {
    assemble_raster(tiles, insets, output, like, style);
    return;
  }
  // Volumes, and rasters without a geotransform (a VRT needs one to place its sources): paste.
  auto sink = create_label_sink(output, like, style);
  for (size_t i = 0; i < tiles.size(); ++i) {
    auto tile = open_image(tiles[i]);
    const Block<float> values = tile->read(Box{Index(insets[i].dims(), 0), insets[i].size});
    Block<uint8_t> labels(values.shape);
    for (size_t k = 0; k < values.data.size(); ++k) labels.data[k] = std::isnan(values.data[k]) ? kNoDataLabel : static_cast<uint8_t>(values.data[k]);
    sink->write(insets[i], labels);
  }
  sink->commit();
}

}  // namespace tessera::io
