#pragma once
// The last steps of every label GeoTIFF Tessera writes (LabelRasterWriter, the mosaic of a
// run's tiles, restyle_label_raster) and the COG translation the probability raster shares.
// Internal to io: GDAL handles and config stay here.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gdal.h>

#include "tessera/io/label_style.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io::detail {

/// Pixels per label value (nodata kNoDataLabel included at its index; callers skip it).
using LabelCounts = std::array<int64_t, 256>;

/// Band 1 of the GeoTIFF at `path` counted by value. Throws tessera::Error naming `name`.
LabelCounts count_labels(const std::string& path, const std::string& name);

/// Finishes the closed label GeoTIFF at `gtiff.path()` as `style` asks — CLASS_<id> metadata,
/// category names and attribute table with `counts` (its .aux.xml), COG, .qml — and moves
/// everything to `gtiff.final_path()`, the raster last. On error nothing new appears there.
void publish_label_raster(StagedFile& gtiff, const LabelStyle& style, const LabelCounts& counts);

/// GDAL's COG driver from the finished GeoTIFF `source` to `target` (DEFLATE, 256 px tiles,
/// internal overviews made with `resampling`, e.g. "MODE" or "AVERAGE"; `predictor` for
/// floating-point data). PAM is on while it runs, so the source's .aux.xml (names, attribute
/// table) is copied to `<target>.aux.xml`. Throws tessera::Error naming `name`.
void translate_to_cog(const std::string& source, const std::string& target, const char* resampling, bool predictor,
                      const std::string& name);

/// The colour table every Tessera label raster carries: class_color(colors, id) per id,
/// nodata kNoDataLabel transparent black.
void set_label_colour_table(GDALRasterBandH band, const std::vector<Rgb>& colors = {});

/// GDAL's .aux.xml files (PAM) on for this thread while the scope lives; init_gdal turns them
/// off process-wide so that reading a user's data never leaves one beside it.
class PamScope {
 public:
  PamScope();
  ~PamScope();
  PamScope(const PamScope&) = delete;
  PamScope& operator=(const PamScope&) = delete;

 private:
  std::optional<std::string> previous_;
};

}  // namespace tessera::io::detail
