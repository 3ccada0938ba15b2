#include "tessera/io/stac.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <gdal.h>
#include <nlohmann/json.hpp>
#include <ogr_spatialref.h>

#include "gdal_error.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/output_set.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using detail::gdal_error;

constexpr const char* kStacVersion = "1.0.0";
constexpr const char* kLabelExtension = "https://stac-extensions.github.io/label/v1.0.1/schema.json";
constexpr const char* kProjectionExtension = "https://stac-extensions.github.io/projection/v1.1.0/schema.json";
constexpr const char* kClassificationExtension = "https://stac-extensions.github.io/classification/v1.1.0/schema.json";
constexpr const char* kGeoTiff = "image/tiff; application=geotiff";
constexpr const char* kCollectionFile = "collection.json";
constexpr int kPointsPerEdge = 16;  // footprint densification: a UTM edge bends in lon/lat

// ---- time ------------------------------------------------------------------------------

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Seconds since the epoch of an RFC 3339 date-time; nullopt when `s` is not one.
std::optional<double> rfc3339_seconds(const std::string& s) {
  static const std::regex re(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  auto num = [&](int i) { return std::stoll(m[i].str()); };
  if (num(2) < 1 || num(2) > 12 || num(3) < 1 || num(3) > 31 || num(4) > 23 || num(5) > 59 || num(6) > 60)
    return std::nullopt;
  double t = double(days_from_civil(num(1), num(2), num(3)) * 86400 + num(4) * 3600 + num(5) * 60 + num(6));
  if (m[7].matched) t += std::stod("0" + m[7].str());
  if (m[9].matched) t -= (m[9].str() == "-" ? -1.0 : 1.0) * double(num(10) * 3600 + num(11) * 60);
  return t;
}

// "2024-05-02 10:00:00", "2024:05:02 10:00:00.5", "2024-05-02T10:00:00Z" as RFC 3339 (UTC when
// no zone is given); "" when the text is not such a date-time.
std::string as_rfc3339(std::string text) {
  static const std::regex re(R"(^\s*(\d{4})[-:](\d{2})[-:](\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?\s*([Zz]|[+-]\d{2}:\d{2})?\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return "";
  const std::string s = m[1].str() + "-" + m[2].str() + "-" + m[3].str() + "T" + m[4].str() + ":" + m[5].str() + ":" +
                        m[6].str() + m[7].str() + (m[8].matched ? m[8].str() : "Z");
  return rfc3339_seconds(s) ? s : "";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// ---- hrefs -----------------------------------------------------------------------------

bool is_url(const std::string& s) { return s.find("://") != std::string::npos || s.rfind("/vsi", 0) == 0; }

fs::path absolute_path(const std::string& p) { return fs::absolute(fs::path(p)).lexically_normal(); }

// `target` as an href from `folder` (absolute): relative when both lie under one top-level
// folder (the catalogue moves with its files) or when `relative` asks so, else absolute; URLs
// unchanged.
std::string href_for(const fs::path& folder, const std::string& target, bool relative = false) {
  if (is_url(target)) return target;
  const fs::path abs = absolute_path(target);
  auto top = [](const fs::path& p) {
    auto it = p.begin();
    if (it != p.end() && p.has_root_directory()) ++it;
    return it == p.end() ? fs::path() : *it;
  };
  const fs::path rel = abs.lexically_relative(folder);
  if (rel.empty() || (!relative && top(abs) != top(folder))) return abs.generic_string();
  return rel.generic_string();
}

// A local path kept in a property: absolute, so it means the same from anywhere; relative to
// the item's `folder` in a self-contained item.
std::string path_property(const fs::path& folder, const std::string& p, bool relative) {
  if (relative) return href_for(folder, p, true);
  return is_url(p) ? p : absolute_path(p).generic_string();
}

std::string media_type_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".tif" || ext == ".tiff") return kGeoTiff;
  if (ext == ".gpkg") return "application/geopackage+sqlite3";
  if (ext == ".geojson") return "application/geo+json";
  if (ext == ".json") return "application/json";
  if (ext == ".png") return "image/png";
  if (ext == ".jpg" || ext == ".jpeg") return "image/jpeg";
  if (ext == ".vrt") return "application/xml";
  return "";
}

// nlohmann's indented dump puts every number on a line of its own; a position, a bbox or a
// transform reads better on one. Collapses the arrays that hold only numbers or nulls. Outside
// strings only: "[" followed by a newline is structure, as dump() escapes newlines in strings.
std::string with_number_arrays_on_one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] != '[' || i + 1 >= text.size() || text[i + 1] != '\n') continue;
    const size_t close = text.find(']', i);
    if (close == std::string::npos) continue;
    const std::string inner = text.substr(i + 1, close - i - 1);
    if (inner.find_first_not_of("0123456789+-.eE,nul \n") != std::string::npos) continue;
    std::stringstream items(inner);
    std::string item, joined;
    while (std::getline(items, item, ',')) {
      item.erase(0, item.find_first_not_of(" \n"));
      item.erase(item.find_last_not_of(" \n") + 1);
      joined += (joined.empty() ? "" : ", ") + item;
    }
    out += joined + "]";
    i = close;
  }
  return out;
}

std::string pretty(const Json& doc) { return with_number_arrays_on_one_line(doc.dump(2)) + "\n"; }

Json null_if_empty(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

Json link(const std::string& rel, const std::string& href, const std::string& type, const std::string& title = {}) {
  Json l = {{"rel", rel}, {"href", href}};
  if (!type.empty()) l["type"] = type;
  if (!title.empty()) l["title"] = title;
  return l;
}

// ---- the raster's footprint (GDAL) -------------------------------------------------------

struct Footprint {
  std::vector<std::array<double, 2>> ring;  // lon, lat; closed, counter-clockwise
  std::array<double, 4> bbox{};             // of the ring
  std::array<double, 4> proj_bbox{};        // of the corners, in the raster's CRS
  std::array<double, 6> gt{};               // GDAL geotransform
  int64_t rows = 0, cols = 0;
  std::optional<int> epsg;
  std::string wkt2;
};

struct DatasetCloser {
  void operator()(GDALDatasetH ds) const { GDALClose(ds); }
};
struct TransformDeleter {
  void operator()(OGRCoordinateTransformation* t) const { OGRCoordinateTransformation::DestroyCT(t); }
};

std::optional<int> epsg_of(const OGRSpatialReference& srs) {
  OGRSpatialReference probe(srs);
  const char* name = probe.GetAuthorityName(nullptr);
  if (!name || std::string(name) != "EPSG") {
    if (probe.AutoIdentifyEPSG() != OGRERR_NONE) return std::nullopt;
    name = probe.GetAuthorityName(nullptr);
  }
  const char* code = probe.GetAuthorityCode(nullptr);
  if (!name || std::string(name) != "EPSG" || !code) return std::nullopt;
  return std::atoi(code);
}

// The pixel-space boundary, kPointsPerEdge points per edge, starting at the top-left corner.
std::vector<std::array<double, 2>> pixel_boundary(double cols, double rows) {
  const std::array<std::array<double, 2>, 5> corners{{{0, 0}, {cols, 0}, {cols, rows}, {0, rows}, {0, 0}}};
  std::vector<std::array<double, 2>> out;
  for (size_t e = 0; e < 4; ++e)
    for (int k = 0; k < kPointsPerEdge; ++k) {
      const double f = double(k) / kPointsPerEdge;
      out.push_back({corners[e][0] + f * (corners[e + 1][0] - corners[e][0]),
                     corners[e][1] + f * (corners[e + 1][1] - corners[e][1])});
    }
  return out;
}

double signed_area(const std::vector<std::array<double, 2>>& ring) {
  double a = 0;
  for (size_t i = 0; i + 1 < ring.size(); ++i) a += ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1];
  return a / 2;
}

void transform_to_lonlat(const std::string& raster, const OGRSpatialReference& crs, Footprint& fp) {
  OGRSpatialReference src(crs), wgs84;
  wgs84.importFromEPSG(4326);
  src.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  wgs84.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  CPLErrorReset();
  std::unique_ptr<OGRCoordinateTransformation, TransformDeleter> to_wgs84(
      OGRCreateCoordinateTransformation(&src, &wgs84));
  if (!to_wgs84) throw Error(raster + ": cannot transform its CRS to WGS 84: " + gdal_error());
  const auto pixels = pixel_boundary(double(fp.cols), double(fp.rows));
  std::vector<double> x, y;
  for (const auto& p : pixels) {
    x.push_back(fp.gt[0] + p[0] * fp.gt[1] + p[1] * fp.gt[2]);
    y.push_back(fp.gt[3] + p[0] * fp.gt[4] + p[1] * fp.gt[5]);
  }
  fp.proj_bbox = {*std::min_element(x.begin(), x.end()), *std::min_element(y.begin(), y.end()),
                  *std::max_element(x.begin(), x.end()), *std::max_element(y.begin(), y.end())};
  std::vector<int> ok(x.size(), 0);
  if (!to_wgs84->Transform(x.size(), x.data(), y.data(), nullptr, ok.data()) ||
      std::find(ok.begin(), ok.end(), 0) != ok.end())
    throw Error(raster + ": its footprint cannot be transformed to WGS 84: " + gdal_error("outside the CRS's area"));
  fp.ring.clear();
  for (size_t i = 0; i < x.size(); ++i) fp.ring.push_back({x[i], y[i]});
  fp.ring.push_back(fp.ring.front());
  if (signed_area(fp.ring) < 0) std::reverse(fp.ring.begin(), fp.ring.end());
  fp.bbox = {std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
             std::numeric_limits<double>::lowest(), std::numeric_limits<double>::lowest()};
  for (const auto& p : fp.ring) {
    fp.bbox[0] = std::min(fp.bbox[0], p[0]);
    fp.bbox[1] = std::min(fp.bbox[1], p[1]);
    fp.bbox[2] = std::max(fp.bbox[2], p[0]);
    fp.bbox[3] = std::max(fp.bbox[3], p[1]);
  }
}

Footprint read_footprint(const std::string& raster) {
  ensure_gdal();
  CPLErrorReset();
  std::unique_ptr<void, DatasetCloser> ds(GDALOpen(raster.c_str(), GA_ReadOnly));
  if (!ds) throw Error(raster + ": cannot open: " + gdal_error());
  Footprint fp;
  fp.rows = GDALGetRasterYSize(ds.get());
  fp.cols = GDALGetRasterXSize(ds.get());
  const char* wkt = GDALGetProjectionRef(ds.get());
  if (GDALGetGeoTransform(ds.get(), fp.gt.data()) != CE_None || !wkt || !*wkt)
    throw Error(raster + ": no georeference; a STAC item needs one");
  OGRSpatialReference crs;
  if (crs.importFromWkt(wkt) != OGRERR_NONE) throw Error(raster + ": unreadable CRS: " + gdal_error());
  fp.epsg = epsg_of(crs);
  if (!fp.epsg) {
    char* text = nullptr;
    const char* const options[] = {"FORMAT=WKT2_2019", nullptr};
    if (crs.exportToWkt(&text, options) == OGRERR_NONE && text) fp.wkt2 = text;
    CPLFree(text);
  }
  transform_to_lonlat(raster, crs, fp);
  return fp;
}

// ---- the item ----------------------------------------------------------------------------

int listed_classes(const StacItemOptions& o) { return std::max(o.classes, int(o.class_names.size())); }

// The classification extension's color_hint: RRGGBB without the '#'.
std::string color_hint(const LabelStyle& style, int id) { return hex_color(style.color(id)).substr(1); }

std::string label_description(const StacItemOptions& o, const LabelStyle& style) {
  std::string text = "Semantic segmentation";
  if (!o.model.empty()) text += " by " + o.model;
  const int n = listed_classes(o);
  text += " into " + std::to_string(n) + (n == 1 ? " class" : " classes");
  for (int id = 0; id < n; ++id) text += (id == 0 ? ": " : ", ") + std::to_string(id) + " " + style.name(id);
  return text + "; " + std::to_string(kNoDataLabel) + " is nodata.";
}

Json labels_asset(const std::string& path, const StacItemOptions& o, const Footprint& fp, const LabelStyle& style) {
  const fs::path folder = absolute_path(path).parent_path();
  Json classes = Json::array();
  for (int id = 0; id < listed_classes(o); ++id)
    classes.push_back(
        {{"value", id}, {"description", style.name(id)}, {"name", style.name(id)}, {"color_hint", color_hint(style, id)}});
  Json a = {{"href", href_for(folder, o.raster, o.relative)},
            {"type", std::string(kGeoTiff) + (wants_cog(o.raster, o.cog) ? "; profile=cloud-optimized" : "")},
            {"title", "Labels"},
            {"roles", {"data", "labels", "labels-raster"}},
            {"proj:shape", {fp.rows, fp.cols}},
            {"proj:transform", {fp.gt[1], fp.gt[2], fp.gt[0], fp.gt[4], fp.gt[5], fp.gt[3]}}};
  if (!classes.empty()) a["classification:classes"] = classes;
  return a;
}

// Where a file an item names is now: staged by the run's outputs, or in place.
std::string located(const StacItemOptions& o, const std::string& path) { return o.outputs ? o.outputs->locate(path) : path; }

Json extra_asset(const fs::path& folder, const StacAsset& asset, const StacItemOptions& o) {
  if (!is_url(asset.href) && !fs::exists(located(o, asset.href)))
    throw Error(asset.href + ": asset '" + asset.key + "' does not exist");
  Json a = {{"href", href_for(folder, asset.href, o.relative)}};
  const std::string type = asset.media_type.empty() ? media_type_of(asset.href) : asset.media_type;
  if (!type.empty()) a["type"] = type;
  if (!asset.title.empty()) a["title"] = asset.title;
  if (!asset.roles.empty()) a["roles"] = asset.roles;
  return a;
}

Json item_properties(const fs::path& folder, const StacItemOptions& o, const Footprint& fp, const LabelStyle& style) {
  Json ids = Json::array();
  for (int id = 0; id < listed_classes(o); ++id) ids.push_back(id);
  // STAC's datetime may be null only with start_datetime and end_datetime, which an unknown
  // acquisition time cannot give: then the processing time, and the property says so.
  Json p = {{"datetime", o.datetime.empty() ? utc_now() : o.datetime},
            {"created", utc_now()},
            {"tessera:datetime_source", !o.datetime_source.empty() ? o.datetime_source
                                        : o.datetime.empty()       ? "processing time (acquisition time unknown)"
                                                                   : "given"}};
  p["proj:epsg"] = fp.epsg ? Json(*fp.epsg) : Json(nullptr);
  if (!fp.epsg) p["proj:wkt2"] = fp.wkt2;
  p["proj:transform"] = {fp.gt[1], fp.gt[2], fp.gt[0], fp.gt[4], fp.gt[5], fp.gt[3]};
  p["proj:shape"] = {fp.rows, fp.cols};
  p["proj:bbox"] = fp.proj_bbox;
  p["label:type"] = "raster";
  p["label:properties"] = nullptr;
  p["label:tasks"] = {"segmentation"};
  p["label:methods"] = {"automated"};
  p["label:classes"] = Json::array({{{"name", nullptr}, {"classes", ids}}});
  p["label:description"] = label_description(o, style);
  p["tessera:model"] = null_if_empty(o.model);
  p["tessera:checkpoint"] = o.checkpoint.empty() ? Json(nullptr) : Json(path_property(folder, o.checkpoint, o.relative));
  p["tessera:source"] = o.source.empty() ? Json(nullptr) : Json(path_property(folder, o.source, o.relative));
  return p;
}

Json item_links(const std::string& path, const StacItemOptions& o) {
  const fs::path folder = absolute_path(path).parent_path();
  Json links = Json::array();
  if (!o.source.empty())
    links.push_back(link("source", href_for(folder, o.source, o.relative), media_type_of(o.source), "Input image"));
  if (!o.collection.empty())
    for (const char* rel : {"collection", "parent", "root"})
      links.push_back(link(rel, kCollectionFile, "application/json"));
  if (!o.relative) links.push_back(link("self", absolute_path(path).generic_string(), "application/geo+json"));
  return links;
}

Json item_json(const std::string& path, const StacItemOptions& o) {
  const Footprint fp = read_footprint(located(o, o.raster));
  LabelStyle style;
  style.class_names = o.class_names;
  style.class_colors = o.class_colors;
  Json ring = Json::array();
  for (const auto& p : fp.ring) ring.push_back({p[0], p[1]});
  Json item = {{"type", "Feature"},
               {"stac_version", kStacVersion},
               {"stac_extensions", {kLabelExtension, kProjectionExtension, kClassificationExtension}},
               {"id", o.id}};
  if (!o.collection.empty()) item["collection"] = o.collection;
  item["geometry"] = {{"type", "Polygon"}, {"coordinates", Json::array({ring})}};
  item["bbox"] = fp.bbox;
  const fs::path folder = absolute_path(path).parent_path();
  item["properties"] = item_properties(folder, o, fp, style);
  item["links"] = item_links(path, o);
  Json assets = {{"labels", labels_asset(path, o, fp, style)}};
  for (const StacAsset& a : o.extra_assets) assets[a.key] = extra_asset(folder, a, o);
  item["assets"] = assets;
  return item;
}

// ---- reading -------------------------------------------------------------------------------

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON (truncated or corrupt): " + e.what());
  }
}

std::string string_or_empty(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
}

// A path property of the item at `item`: a relative one (a self-contained item) resolved
// against the item's folder; absolute paths and URLs as written.
std::string from_item(const std::string& item, const std::string& p) {
  if (p.empty() || is_url(p) || fs::path(p).is_absolute()) return p;
  return (absolute_path(item).parent_path() / p).lexically_normal().generic_string();
}

}  // namespace

void StacItemOptions::validate() const {
  if (id.empty()) throw Error("id: a STAC item needs one");
  if (raster.empty()) throw Error("raster: the label raster to describe is missing");
  if (classes < 0 || classes > kNoDataLabel)
    throw Error("classes: must be in 0.." + std::to_string(kNoDataLabel) + ", got " + std::to_string(classes));
  if (class_names.size() > size_t(kNoDataLabel))
    throw Error("class_names: at most " + std::to_string(kNoDataLabel) + " names, got " +
                std::to_string(class_names.size()));
  if (!datetime.empty() && !rfc3339_seconds(datetime))
    throw Error("datetime: '" + datetime + "' is not an RFC 3339 date-time (e.g. 2024-05-02T10:00:00Z)");
  std::set<std::string> keys{"labels"};
  for (const StacAsset& a : extra_assets) {
    if (a.key.empty()) throw Error("extra_assets: an asset without a key (href '" + a.href + "')");
    if (a.href.empty()) throw Error("extra_assets: asset '" + a.key + "' has no href");
    if (!keys.insert(a.key).second) throw Error("extra_assets: asset key '" + a.key + "' is used twice");
  }
}

std::optional<std::pair<std::string, std::string>> acquisition_datetime(const std::string& raster) {
  ensure_gdal();
  GDALDatasetH ds = GDALOpen(raster.c_str(), GA_ReadOnly);
  if (!ds) return std::nullopt;
  auto item = [&](const char* key, const char* domain) -> std::string {
    const char* v = GDALGetMetadataItem(ds, key, domain);
    return v ? v : "";
  };
  std::optional<std::pair<std::string, std::string>> found;
  const std::string imagery = as_rfc3339(item("ACQUISITIONDATETIME", "IMAGERY"));
  if (!imagery.empty()) found = {imagery, "IMAGERY ACQUISITIONDATETIME"};
  for (const char* key : {"ACQUISITION_DATETIME", "ACQUISITIONDATETIME", "SENSING_TIME"})
    if (!found && !as_rfc3339(item(key, nullptr)).empty()) found = {as_rfc3339(item(key, nullptr)), key};
  const std::string landsat = as_rfc3339(item("DATE_ACQUIRED", nullptr) + " " + item("SCENE_CENTER_TIME", nullptr));
  if (!found && !landsat.empty()) found = {landsat, "DATE_ACQUIRED SCENE_CENTER_TIME"};
  GDALClose(ds);
  return found;
}

std::string stac_item_path(const std::string& raster) {
  return (fs::path(raster).parent_path() / fs::path(raster).stem()).string() + ".stac.json";
}

void write_stac_item(const std::string& path, const StacItemOptions& options) {
  options.validate();
  const Json item = item_json(path, options);
  write_file_atomically(located(options, path), {pretty(item)});
}

StacItemSummary read_stac_item(const std::string& path) {
  const nlohmann::json j = read_json(path);
  try {
    if (!j.is_object() || j.value("type", "") != "Feature" || !j.contains("stac_version"))
      throw Error(path + ": not a STAC item (no \"type\": \"Feature\" with a stac_version)");
    const auto& props = j.at("properties");
    StacItemSummary s;
    s.id = j.at("id").get<std::string>();
    s.collection = string_or_empty(j, "collection");
    s.datetime = string_or_empty(props, "datetime");
    s.model = string_or_empty(props, "tessera:model");
    s.checkpoint = from_item(path, string_or_empty(props, "tessera:checkpoint"));
    s.source = from_item(path, string_or_empty(props, "tessera:source"));
    if (props.contains("proj:shape")) s.shape = props.at("proj:shape").get<std::vector<int64_t>>();
    const auto bbox = j.at("bbox").get<std::vector<double>>();
    if (bbox.size() != 4) throw Error(path + ": bbox: expected 4 numbers, got " + std::to_string(bbox.size()));
    std::copy(bbox.begin(), bbox.end(), s.bbox.begin());
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a STAC item: " + e.what());
  }
}

void write_stac_collection(const std::string& path, const std::string& id, const std::string& description,
                           const std::vector<std::string>& item_paths, bool relative) {
  if (item_paths.empty()) throw Error(path + ": a STAC collection needs at least one item");
  const fs::path folder = absolute_path(path).parent_path();
  std::array<double, 4> bbox = {std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::lowest(), std::numeric_limits<double>::lowest()};
  std::optional<std::pair<double, std::string>> first, last;
  Json links = Json::array({link("root", "./" + fs::path(path).filename().generic_string(), "application/json")});
  if (!relative) links.push_back(link("self", absolute_path(path).generic_string(), "application/json"));
  for (const std::string& item_path : item_paths) {
    const StacItemSummary item = read_stac_item(item_path);
    if (!item.collection.empty() && item.collection != id)
      throw Error(item_path + ": belongs to collection '" + item.collection + "', not '" + id + "'");
    const std::optional<double> t = rfc3339_seconds(item.datetime);
    if (!t) throw Error(item_path + ": properties.datetime: '" + item.datetime + "' is not an RFC 3339 date-time");
    if (!first || *t < first->first) first = {*t, item.datetime};
    if (!last || *t > last->first) last = {*t, item.datetime};
    for (int k = 0; k < 2; ++k) {
      bbox[size_t(k)] = std::min(bbox[size_t(k)], item.bbox[size_t(k)]);
      bbox[size_t(k + 2)] = std::max(bbox[size_t(k + 2)], item.bbox[size_t(k + 2)]);
    }
    links.push_back(link("item", href_for(folder, item_path, relative), "application/geo+json", item.id));
  }
  Json collection = {{"type", "Collection"},
                     {"stac_version", kStacVersion},
                     {"stac_extensions", Json::array()},
                     {"id", id},
                     {"description", description.empty() ? "Label rasters made by Tessera" : description},
                     {"license", "proprietary"},
                     {"extent",
                      {{"spatial", {{"bbox", Json::array({bbox})}}},
                       {"temporal", {{"interval", Json::array({Json::array({first->second, last->second})})}}}}},
                     {"links", links}};
  write_file_atomically(path, {pretty(collection)});
}

}  // namespace tessera::io
