#pragma once
// A STAC catalogue of label rasters (STAC 1.0.0), so that analysts and catalogue tools
// (pystac, stac-browser, QGIS) find what a run made, where, from what and with which model.
//
// Item (`<raster minus extension>.stac.json`, next to the raster): a GeoJSON Feature whose
// geometry is the raster's footprint in WGS 84 longitude/latitude (each edge densified, so a
// projected raster's curved outline is followed; counter-clockwise, closed) and whose bbox is
// that ring's [min lon, min lat, max lon, max lat]. Extensions: label v1.0.1 (label:type
// "raster", tasks ["segmentation"], the class ids), projection v1.1.0 (proj:epsg or
// proj:wkt2, proj:transform in affine a..f order, proj:shape (rows, columns), proj:bbox in
// the raster's CRS) and classification v1.1.0 (per class: value, name, colour of the label
// raster's colour table). Tessera's own properties: tessera:model, tessera:checkpoint,
// tessera:source. Links: "source" (the input image), "self", and "collection" / "parent" /
// "root" to `collection.json` in the item's folder when a collection is named.
// Local hrefs are relative to the item's folder when both share a top-level folder, absolute
// otherwise; URLs and GDAL /vsi paths are kept as given. With `relative` (infer --stac-relative)
// the item is self-contained, as STAC calls it: every local href and the tessera:source /
// tessera:checkpoint paths relative to the item's folder whatever folders they lie in, and no
// absolute "self" link, so the folder can be moved or published as it is.
//
// Collection: extent = union of its items' bboxes and the span of their datetimes; links
// "item" (relative), "self" (not when relative), "root".
//
// Files appear complete or not at all (tessera/run/staged_file.hpp). GDAL and JSON types stay
// in io/src. Footprints crossing the antimeridian are not split. Thread safe for distinct paths.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/colors.hpp"

namespace tessera {
class OutputSet;
}

namespace tessera::io {

/// One more file an item describes (probabilities, polygons, an overlay).
struct StacAsset {
  std::string key;                 ///< asset key, unique in the item; not "labels"
  std::string href;                ///< path (must exist) or URL; written relative to the item when possible
  std::string media_type;          ///< "" = from the extension (.tif, .gpkg, .geojson, .json, .png, .jpg)
  std::string title;               ///< may be empty
  std::vector<std::string> roles;  ///< e.g. {"data"}, {"overview"}; may be empty
};

/// What write_stac_item() describes. Required: the item id and the finished label raster.
struct StacItemOptions {
  std::string id;                        ///< item id, e.g. the output's stem
  std::string raster;                    ///< finished label GeoTIFF; footprint and proj fields come from it
  std::vector<std::string> class_names;  ///< by class id; ids without a name are "class <id>"
  std::vector<Rgb> class_colors;         ///< by class id (color_hint); others label_color(id)
  int classes = 0;                       ///< classes listed: ids 0..max(classes, class_names.size())-1
  std::string model;                     ///< e.g. "unet-tiny" or the checkpoint's model description; "" = null
  std::string checkpoint;                ///< the checkpoint that made the labels; "" (random init) = null
  std::string source;                    ///< the input image; "" = no source link
  std::vector<StacAsset> extra_assets;   ///< only files that exist
  std::string collection;                ///< collection id, or "" for a standalone item
  std::string datetime;                  ///< RFC 3339 (e.g. 2024-05-02T10:00:00Z); "" = now, UTC
  /// Where `datetime` comes from, as property tessera:datetime_source (e.g. "acquisition time
  /// (IMAGERY ACQUISITIONDATETIME)"); with no datetime: "processing time (acquisition time unknown)".
  std::string datetime_source;
  bool cog = false;                      ///< the labels are a Cloud-Optimized GeoTIFF (also when named .cog.tif)
  bool relative = false;                 ///< self-contained: relative local paths only, no "self" link
  /// Outputs of the same run not yet committed (tessera/run/output_set.hpp), or nullptr. With
  /// one, every path here and the item's own are final paths: hrefs and the "self" link name
  /// them, while the files are read, and the item written, where the set has them staged.
  const OutputSet* outputs = nullptr;

  StacItemOptions(std::string id_, std::string raster_) : id(std::move(id_)), raster(std::move(raster_)) {}
  StacItemOptions& with_class_names(std::vector<std::string> v) { class_names = std::move(v); return *this; }
  StacItemOptions& with_class_colors(std::vector<Rgb> v) { class_colors = std::move(v); return *this; }
  StacItemOptions& with_classes(int v) { classes = v; return *this; }
  StacItemOptions& with_model(std::string v) { model = std::move(v); return *this; }
  StacItemOptions& with_checkpoint(std::string v) { checkpoint = std::move(v); return *this; }
  StacItemOptions& with_source(std::string v) { source = std::move(v); return *this; }
  StacItemOptions& with_extra_assets(std::vector<StacAsset> v) { extra_assets = std::move(v); return *this; }
  StacItemOptions& with_collection(std::string v) { collection = std::move(v); return *this; }
  StacItemOptions& with_datetime(std::string v) { datetime = std::move(v); return *this; }
  StacItemOptions& with_cog(bool v) { cog = v; return *this; }
  StacItemOptions& with_relative(bool v) { relative = v; return *this; }
  StacItemOptions& with_outputs(const OutputSet* v) { outputs = v; return *this; }

  /// Throws tessera::Error naming the bad field (empty id or raster, classes outside 0..255,
  /// a datetime that is not RFC 3339, an extra asset without key or href, or a repeated key).
  void validate() const;
};

/// The acquisition time the metadata of the image `raster` states, as RFC 3339 UTC, and the
/// key it came from: GDAL's IMAGERY domain ACQUISITIONDATETIME, else the dataset metadata's
/// ACQUISITION_DATETIME / ACQUISITIONDATETIME / SENSING_TIME / DATE_ACQUIRED (+ SCENE_CENTER_TIME,
/// Landsat's MTL names). Never TIFFTAG_DATETIME (the file's creation). nullopt when none parses.
std::optional<std::pair<std::string, std::string>> acquisition_datetime(const std::string& raster);

/// Where the item of `raster` goes: its name minus the last extension plus ".stac.json"
/// (labels.tif -> labels.stac.json, labels.cog.tif -> labels.cog.stac.json). No I/O.
std::string stac_item_path(const std::string& raster);

/// Writes the STAC item of `options.raster` to `path` (2-space indented JSON), atomically.
/// Throws tessera::Error naming the file: "<raster>: no georeference; a STAC item needs one"
/// for a raster without CRS or geotransform, "<href>: ..." for a missing extra asset.
void write_stac_item(const std::string& path, const StacItemOptions& options);

/// What read_stac_item() gives back of an item.
struct StacItemSummary {
  std::string id;
  std::string model;                 ///< "" when null
  std::string checkpoint;            ///< "" when null; a relative path resolved against the item's folder
  std::string source;                ///< "" when null; a relative path resolved against the item's folder
  std::string collection;            ///< "" when the item names none
  std::string datetime;              ///< properties.datetime as written
  std::vector<int64_t> shape;        ///< proj:shape (rows, columns); empty when absent
  std::array<double, 4> bbox{};      ///< min lon, min lat, max lon, max lat
};

/// Reads a STAC item. Throws tessera::Error("<path>: ...") when the file is missing, is not
/// JSON, or is not a STAC item (type "Feature" with stac_version, id, bbox and properties).
StacItemSummary read_stac_item(const std::string& path);

/// Writes a STAC collection of the items at `item_paths` (written by write_stac_item) to
/// `path`, atomically; `relative`: self-contained (item links relative, no "self" link).
/// Throws tessera::Error naming the file: no items, an item that cannot be read, or one that
/// belongs to another collection.
void write_stac_collection(const std::string& path, const std::string& id, const std::string& description,
                           const std::vector<std::string>& item_paths, bool relative = false);

}  // namespace tessera::io
