#include "tessera/io/reproject.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_minixml.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_utils.h>
#include <ogr_srs_api.h>

#include "gdal_args.hpp"
#include "gdal_error.hpp"
#include "label_output.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using detail::gdal_error;
using detail::exact_decimal;
using detail::set_label_colour_table;

struct CloseDataset {
  void operator()(GDALDatasetH ds) const { GDALClose(ds); }
};
using Dataset = std::unique_ptr<void, CloseDataset>;
struct DestroySrs {
  void operator()(OGRSpatialReferenceH srs) const { OSRDestroySpatialReference(srs); }
};
using Srs = std::unique_ptr<void, DestroySrs>;
struct DestroyXml {
  void operator()(CPLXMLNode* node) const { CPLDestroyXMLNode(node); }
};
using Xml = std::unique_ptr<CPLXMLNode, DestroyXml>;

const std::string kNoData = std::to_string(int(kNoDataLabel));


// `text` on one line, cut to `most` characters (a WKT in a message).
std::string one_line(std::string text, size_t most = 100) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text.size() <= most ? text : text.substr(0, most) + "...";
}

bool is_gdal_virtual(const std::string& path) { return path.rfind("/vsi", 0) == 0; }

// The path GDAL is given for `path`: absolute and free of symlinks, so that a VRT can store
// it relative to its own folder; /vsi… paths as they are.
std::string resolved(const std::string& path) {
  if (is_gdal_virtual(path)) return path;
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return path;
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return (ec ? absolute.lexically_normal() : canonical).string();
}

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// The label raster at `path` opened for reading: it exists and has one Byte band. Errors name
// `name` (the path as the user gave it).
Dataset open_labels(const std::string& path, const std::string& name) {
  VSIStatBufL stat;
  if (VSIStatL(path.c_str(), &stat) != 0) throw Error(name + ": no such file");
  CPLErrorReset();
  Dataset ds(GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr));
  if (!ds) throw Error(name + ": cannot open as a raster: " + gdal_error("not a recognised format"));
  const int bands = GDALGetRasterCount(ds.get());
  const GDALDataType type = bands > 0 ? GDALGetRasterDataType(GDALGetRasterBand(ds.get(), 1)) : GDT_Unknown;
  if (bands != 1 || type != GDT_Byte)
    throw Error(name + ": not a label raster (" + std::to_string(bands) + " band(s) of " + GDALGetDataTypeName(type) +
                "; labels are one Byte band)");
  return ds;
}

// "<authority>:<code>" of `srs`, also when GDAL has to identify it; none for a custom CRS.
std::optional<std::string> authority_code(OGRSpatialReferenceH srs) {
  auto code_of = [](OGRSpatialReferenceH s) -> std::optional<std::string> {
    const char* authority = OSRGetAuthorityName(s, nullptr);
    const char* code = OSRGetAuthorityCode(s, nullptr);
    if (authority && code) return std::string(authority) + ":" + code;
    return std::nullopt;
  };
  if (auto code = code_of(srs)) return code;
  Srs clone(OSRClone(srs));
  if (clone && OSRAutoIdentifyEPSG(clone.get()) == OGRERR_NONE) return code_of(clone.get());
  return std::nullopt;
}

std::string crs_name(OGRSpatialReferenceH srs) {
  if (auto code = authority_code(srs)) return *code;
  char* wkt = nullptr;
  const char* options[] = {"FORMAT=WKT2", "MULTILINE=NO", nullptr};
  std::string text;
  if (OSRExportToWktEx(srs, &wkt, options) == OGRERR_NONE && wkt) text = wkt;
  CPLFree(wkt);
  return text;
}

// A CRS as a message shows it: its code, else its name (a WKT is too long for one line).
std::string crs_label(OGRSpatialReferenceH srs) {
  if (auto code = authority_code(srs)) return *code;
  const char* name = OSRGetName(srs);
  return "\"" + std::string(name && *name ? name : "unnamed CRS") + "\" (no EPSG code)";
}

// Band 1 of `ds` keeps `colours` (a source's table) or, when there is none, gets the label one.
void keep_colour_table(GDALDatasetH ds, GDALColorTableH colours) {
  GDALRasterBandH band = GDALGetRasterBand(ds, 1);
  if (GDALGetRasterColorTable(band)) return;
  if (colours) GDALSetRasterColorTable(band, colours);
  else set_label_colour_table(band);
}

// GDALWarp of `sources` (nearest, nodata kNoDataLabel in and out, tiled DEFLATE GeoTIFF) with
// the grid `grid_args`, finished as `style` asks at `target`. The colour table of the first
// source travels along.
void warp_and_publish(const std::vector<GDALDatasetH>& sources, const std::vector<std::string>& grid_args,
                      const std::string& target, const LabelStyle& style) {
  std::vector<std::string> args = {"-of", "GTiff", "-r", "near", "-srcnodata", kNoData, "-dstnodata", kNoData,
                                   "-overwrite", "-co", "TILED=YES", "-co", "BLOCKXSIZE=256", "-co",
                                   "BLOCKYSIZE=256", "-co", "COMPRESS=DEFLATE", "-co", "BIGTIFF=IF_SAFER"};
  args.insert(args.end(), grid_args.begin(), grid_args.end());
  std::vector<char*> argv = argv_of(args);
  GDALWarpAppOptions* options = GDALWarpAppOptionsNew(argv.data(), nullptr);
  if (!options) throw Error(target + ": bad warp options: " + gdal_error());
  StagedFile staged(target);  // no extension: a COG is staged under <target>.partial-<pid>.cog.tif
  int usage_error = 0;
  CPLErrorReset();
  GDALDatasetH out = GDALWarp(staged.path().c_str(), nullptr, int(sources.size()),
                              const_cast<GDALDatasetH*>(sources.data()), options, &usage_error);
  GDALWarpAppOptionsFree(options);
  if (!out) throw Error(target + ": cannot warp the labels: " + gdal_error());
  keep_colour_table(out, GDALGetRasterColorTable(GDALGetRasterBand(sources.front(), 1)));
  CPLErrorReset();
  GDALClose(out);
  if (CPLGetLastErrorType() >= CE_Failure) throw Error(target + ": writing the warped labels failed: " + gdal_error());
  detail::publish_label_raster(staged, style, detail::count_labels(staged.path(), target));
}

// ---- scene mosaic ---------------------------------------------------------------------------

// The scenes of a mosaic, open, under the names GDAL was given (resolved()).
struct Scenes {
  std::vector<std::string> given;     // as the caller named them, for messages
  std::vector<std::string> resolved;  // what GDAL opened and a VRT refers to
  std::vector<Dataset> datasets;

  std::vector<GDALDatasetH> handles() const {
    std::vector<GDALDatasetH> h;
    for (const auto& d : datasets) h.push_back(d.get());
    return h;
  }
};

Scenes open_scenes(const std::vector<std::string>& labels, const std::string& mosaic) {
  if (labels.empty()) throw Error(mosaic + ": no label rasters to mosaic");
  Scenes s;
  for (const auto& path : labels) {
    s.given.push_back(path);
    s.resolved.push_back(resolved(path));
    s.datasets.push_back(open_labels(s.resolved.back(), path));
  }
  return s;
}

// Throws unless every scene has the CRS of the first: the message lists each CRS found with
// (some of) its scenes and says how to bring them to one.
void check_one_crs(const Scenes& s, const std::string& mosaic) {
  struct Group {
    Srs srs;
    std::vector<std::string> scenes;
  };
  std::vector<Group> groups;
  const char* same[] = {"IGNORE_DATA_AXIS_TO_SRS_AXIS_MAPPING=YES", nullptr};
  for (size_t i = 0; i < s.datasets.size(); ++i) {
    OGRSpatialReferenceH srs = GDALGetSpatialRef(s.datasets[i].get());
    if (!srs) throw Error(s.given[i] + ": has no coordinate reference system; a scene mosaic needs georeferenced labels");
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& g) { return OSRIsSameEx(g.srs.get(), srs, same); });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{Srs(OSRClone(srs)), {}});
    g->scenes.push_back(s.given[i]);
  }
  if (groups.size() == 1) return;
  std::string found;
  for (const auto& g : groups) {
    std::string scenes = g.scenes[0];
    if (g.scenes.size() == 2) scenes += ", " + g.scenes[1];
    if (g.scenes.size() > 2) scenes += " and " + std::to_string(g.scenes.size() - 1) + " more";
    found += (found.empty() ? "" : ", ") + crs_label(g.srs.get()) + " (" + scenes + ")";
  }
  throw Error(mosaic + ": the scenes are in " + std::to_string(groups.size()) +
              " coordinate reference systems: " + found + "; warp them to one with --t-srs");
}

// Calls `f` on every element called `name` under `node`.
void for_each_element(CPLXMLNode* node, const char* name, const std::function<void(CPLXMLNode*)>& f) {
  for (; node; node = node->psNext) {
    if (node->eType != CXT_Element) continue;
    if (std::string(node->pszValue) == name) f(node);
    for_each_element(node->psChild, name, f);
  }
}

// GDAL's messages while the scope lives (its last error keeps only one).
class GdalMessages {
 public:
  GdalMessages() { CPLPushErrorHandlerEx(&GdalMessages::collect, this); }
  ~GdalMessages() { CPLPopErrorHandler(); }
  GdalMessages(const GdalMessages&) = delete;
  GdalMessages& operator=(const GdalMessages&) = delete;
  /// The message that names `file`, else the first one, else "".
  std::string about(const std::string& file) const {
    for (const auto& m : messages_)
      if (m.find(file) != std::string::npos) return m;
    return messages_.empty() ? std::string() : messages_.front();
  }

 private:
  static void CPL_STDCALL collect(CPLErr, CPLErrorNum, const char* message) {
    auto* self = static_cast<GdalMessages*>(CPLGetErrorHandlerUserData());
    if (self && message) self->messages_.push_back(one_line(message, 300));
  }
  std::vector<std::string> messages_;
};

// The VRT (in memory) GDALBuildVRT makes of the scenes: union extent, finest pixel size,
// nodata kNoDataLabel. Throws naming a scene GDAL left out (it skips, with a warning, the
// rasters it cannot place: rotated, another colour table, ...).
Dataset build_memory_vrt(const Scenes& s, const std::string& mosaic) {
  std::vector<std::string> args = {"-resolution", "highest", "-srcnodata", kNoData, "-vrtnodata", kNoData};
  std::vector<char*> argv = argv_of(args);
  GDALBuildVRTOptions* options = GDALBuildVRTOptionsNew(argv.data(), nullptr);
  std::vector<GDALDatasetH> handles = s.handles();
  int usage_error = 0;
  GdalMessages messages;
  CPLErrorReset();
  Dataset vrt(GDALBuildVRT("", int(handles.size()), handles.data(), nullptr, options, &usage_error));
  GDALBuildVRTOptionsFree(options);
  if (!vrt) throw Error(mosaic + ": cannot build the scene mosaic: " + gdal_error());
  std::vector<std::string> sources;
  {
    char** xml = GDALGetMetadata(vrt.get(), "xml:VRT");
    Xml root(xml && xml[0] ? CPLParseXMLString(xml[0]) : nullptr);
    if (!root) throw Error(mosaic + ": GDAL gave no VRT description of the mosaic");
    for_each_element(root.get(), "SourceFilename", [&](CPLXMLNode* n) { sources.push_back(CPLGetXMLValue(n, nullptr, "")); });
  }
  for (size_t i = 0; i < s.resolved.size(); ++i)
    if (std::find(sources.begin(), sources.end(), s.resolved[i]) == sources.end()) {
      const std::string why = messages.about(fs::path(s.resolved[i]).filename().string());
      throw Error(s.given[i] + ": GDAL left this scene out of the mosaic " + mosaic + (why.empty() ? "" : ": " + why));
    }
  return vrt;
}

// The ids a VRT mosaic names: 0..classes-1 and every id a scene names (CLASS_<id> metadata,
// which finished label rasters carry for each id present), never nodata.
std::vector<int> named_ids(const Scenes& s, const LabelStyle& style) {
  std::vector<int> ids;
  for (int id = 0; id < 256; ++id) {
    if (id == kNoDataLabel) continue;
    const std::string key = "CLASS_" + std::to_string(id);
    bool named = id < style.classes;
    for (size_t i = 0; i < s.datasets.size() && !named; ++i)
      named = GDALGetMetadataItem(s.datasets[i].get(), key.c_str(), nullptr) != nullptr;
    if (named) ids.push_back(id);
  }
  return ids;
}

// Band 1 of the VRT gets the colour table and, unless the style is bare, the category names.
void present_vrt_classes(GDALDatasetH vrt, const Scenes& s, const LabelStyle& style, const std::string& mosaic) {
  keep_colour_table(vrt, GDALGetRasterColorTable(GDALGetRasterBand(s.datasets.front().get(), 1)));
  const std::vector<int> ids = style.describe ? named_ids(s, style) : std::vector<int>{};
  if (ids.empty()) return;
  std::vector<std::string> names(size_t(ids.back()) + 1);  // indexed by pixel value
  for (int id : ids) names[size_t(id)] = style.name(id);
  std::vector<char*> list;
  for (auto& n : names) list.push_back(n.data());
  list.push_back(nullptr);
  if (GDALSetRasterCategoryNames(GDALGetRasterBand(vrt, 1), list.data()) != CE_None)
    throw Error(mosaic + ": cannot set the category names: " + gdal_error());
}

// The VRT's XML with every scene on disk named relative to the mosaic's folder.
std::string relative_vrt_xml(GDALDatasetH vrt, const std::string& mosaic) {
  char** xml = GDALGetMetadata(vrt, "xml:VRT");
  Xml root(xml && xml[0] ? CPLParseXMLString(xml[0]) : nullptr);
  if (!root) throw Error(mosaic + ": GDAL gave no VRT description of the mosaic");
  const fs::path folder = fs::path(resolved(mosaic)).parent_path();
  for_each_element(root.get(), "SourceFilename", [&](CPLXMLNode* n) {
    const std::string source = CPLGetXMLValue(n, nullptr, "");
    if (is_gdal_virtual(source)) return;
    const std::string relative = fs::path(source).lexically_relative(folder).string();
    if (relative.empty()) return;
    CPLSetXMLValue(n, "", relative.c_str());
    CPLSetXMLValue(n, "#relativeToVRT", "1");
  });
  char* text = CPLSerializeXMLTree(root.get());
  std::string out = text ? text : "";
  CPLFree(text);
  return out;
}

// gdalwarp's grid arguments for the grid of `vrt`: its extent (-te) and pixel size (-tr).
std::vector<std::string> grid_of(GDALDatasetH vrt) {
  double gt[6];
  GDALGetGeoTransform(vrt, gt);
  const double w = GDALGetRasterXSize(vrt), h = GDALGetRasterYSize(vrt);
  return {"-te", exact_decimal(gt[0]), exact_decimal(gt[3] + h * gt[5]), exact_decimal(gt[0] + w * gt[1]), exact_decimal(gt[3]),
          "-tr", exact_decimal(gt[1]), exact_decimal(std::abs(gt[5]))};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                    [](char lower, char c) { return std::tolower(static_cast<unsigned char>(c)) == lower; });
}

}  // namespace

void WarpOptions::validate() const {
  check_target_srs(t_srs);
  if (resolution && !(std::isfinite(*resolution) && *resolution > 0))
    throw Error("resolution: must be a positive pixel size in the units of " + one_line(t_srs) + ", got " +
                exact_decimal(*resolution));
  style.validate();
}

void check_target_srs(const std::string& t_srs) {
  ensure_all_gdal_drivers();
  const std::string shown = "--t-srs " + (t_srs.empty() ? std::string("''") : one_line(t_srs));
  if (t_srs.empty()) throw Error(shown + ": not a coordinate reference system GDAL knows (empty)");
  Srs srs(OSRNewSpatialReference(nullptr));
  CPLErrorReset();
  if (OSRSetFromUserInput(srs.get(), t_srs.c_str()) != OGRERR_NONE)
    throw Error(shown + ": not a coordinate reference system GDAL knows (" + gdal_error("unrecognised") + ")");
}

void warp_label_raster(const std::string& source, const std::string& target, const WarpOptions& o) {
  o.validate();
  ensure_all_gdal_drivers();
  Dataset src = open_labels(source, source);
  if (!GDALGetSpatialRef(src.get())) throw Error(source + ": has no coordinate reference system to warp from");
  if (resolved(source) == resolved(target)) throw Error(target + ": is the source; warp to another file");
  std::vector<std::string> grid = {"-t_srs", o.t_srs};
  if (o.resolution) grid.insert(grid.end(), {"-tr", exact_decimal(*o.resolution), exact_decimal(*o.resolution), "-tap"});
  warp_and_publish({src.get()}, grid, target, o.style);
}

std::string raster_crs_name(const std::string& path) {
  ensure_all_gdal_drivers();
  VSIStatBufL stat;
  if (VSIStatL(path.c_str(), &stat) != 0) throw Error(path + ": no such file");
  CPLErrorReset();
  Dataset ds(GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr));
  if (!ds) throw Error(path + ": cannot open as a raster: " + gdal_error("not a recognised format"));
  OGRSpatialReferenceH srs = GDALGetSpatialRef(ds.get());
  return srs ? crs_name(srs) : std::string();
}

void build_scene_mosaic(const std::vector<std::string>& labels, const std::string& mosaic, const LabelStyle& style) {
  style.validate();
  const bool vrt_out = ends_with(mosaic, ".vrt");
  if (!vrt_out && !ends_with(mosaic, ".tif") && !ends_with(mosaic, ".tiff"))
    throw Error(mosaic + ": a scene mosaic is a .vrt, .tif or .cog.tif");
  ensure_all_gdal_drivers();
  const Scenes scenes = open_scenes(labels, mosaic);
  for (size_t i = 0; i < scenes.resolved.size(); ++i)
    if (scenes.resolved[i] == resolved(mosaic)) throw Error(mosaic + ": is one of the scenes; write the mosaic elsewhere");
  check_one_crs(scenes, mosaic);
  Dataset vrt = build_memory_vrt(scenes, mosaic);
  if (vrt_out) {
    present_vrt_classes(vrt.get(), scenes, style, mosaic);
    write_file_atomically(mosaic, {relative_vrt_xml(vrt.get(), mosaic)});
  } else {
    warp_and_publish(scenes.handles(), grid_of(vrt.get()), mosaic, style);
  }
}

}  // namespace tessera::io
