#include "tessera/io/label_style.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <vector>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <gdal.h>
#include <gdal_rat.h>
#include <gdal_utils.h>

#include "gdal_error.hpp"
#include "label_output.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/label_background.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using detail::gdal_error;
using detail::LabelCounts;

bool ends_with_nocase(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(), [](char lower, char c) {
           return std::tolower(static_cast<unsigned char>(c)) == lower;
         });
}

// The ids a label raster lists (attribute table rows, categories, palette): 0..classes-1 and
// every other id that occurs; never nodata.
std::vector<int> listed_ids(const LabelStyle& style, const std::array<bool, 256>& present) {
  std::vector<int> ids;
  for (int id = 0; id < 256; ++id)
    if (id != kNoDataLabel && (id < style.classes || present[size_t(id)])) ids.push_back(id);
  return ids;
}

std::array<bool, 256> present_of(const LabelCounts& counts) {
  std::array<bool, 256> present{};
  for (size_t i = 0; i < 256; ++i) present[i] = counts[i] > 0;
  return present;
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// The attribute table of band 1: Value, Class_Name, Red, Green, Blue, Count (one row per id).
void set_attribute_table(GDALRasterBandH band, const LabelStyle& style, const std::vector<int>& ids,
                         const LabelCounts& counts) {
  int64_t most = 0;
  for (int id : ids) most = std::max(most, counts[size_t(id)]);
  const bool integer_counts = most <= std::numeric_limits<int>::max();  // GDAL 3.6 RATs have no Int64
  GDALRasterAttributeTableH rat = GDALCreateRasterAttributeTable();
  GDALRATSetTableType(rat, GRTT_THEMATIC);
  GDALRATCreateColumn(rat, "Value", GFT_Integer, GFU_MinMax);
  GDALRATCreateColumn(rat, "Class_Name", GFT_String, GFU_Name);
  GDALRATCreateColumn(rat, "Red", GFT_Integer, GFU_Red);
  GDALRATCreateColumn(rat, "Green", GFT_Integer, GFU_Green);
  GDALRATCreateColumn(rat, "Blue", GFT_Integer, GFU_Blue);
  GDALRATCreateColumn(rat, "Count", integer_counts ? GFT_Integer : GFT_Real, GFU_PixelCount);
  GDALRATSetRowCount(rat, int(ids.size()));
  for (size_t row = 0; row < ids.size(); ++row) {
    const int id = ids[row], r = int(row);
    const Rgb c = style.color(id);
    GDALRATSetValueAsInt(rat, r, 0, id);
    GDALRATSetValueAsString(rat, r, 1, style.name(id).c_str());
    for (int k = 0; k < 3; ++k) GDALRATSetValueAsInt(rat, r, 2 + k, c[size_t(k)]);
    if (integer_counts) GDALRATSetValueAsInt(rat, r, 5, int(counts[size_t(id)]));
    else GDALRATSetValueAsDouble(rat, r, 5, double(counts[size_t(id)]));
  }
  const CPLErr err = GDALSetDefaultRAT(band, rat);
  GDALDestroyRasterAttributeTable(rat);
  if (err != CE_None) throw Error("cannot set the raster attribute table: " + gdal_error());
}

// Names the classes of the GeoTIFF at `path` in place: CLASS_<id> and LABEL_BACKGROUND
// (tessera/io/label_background.hpp) metadata in the TIFF, category names and the attribute
// table in `<path>.aux.xml` (needs a PamScope).
void describe_classes(const std::string& path, const std::string& name, const LabelStyle& style,
                      const LabelCounts& counts) {
  const std::vector<int> ids = listed_ids(style, present_of(counts));
  CPLErrorReset();
  GDALDatasetH ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_UPDATE, nullptr, nullptr, nullptr);
  if (!ds) throw Error(name + ": cannot reopen to name the classes: " + gdal_error());
  try {
    GDALRasterBandH band = GDALGetRasterBand(ds, 1);
    for (int id : ids) {
      const std::string key = "CLASS_" + std::to_string(id);
      GDALSetMetadataItem(ds, key.c_str(), style.name(id).c_str(), nullptr);
    }
    // Whether class 0 is the background (data.background), for the viewer's legend.
    GDALSetMetadataItem(ds, kBackgroundKey, style.is_background(0) ? "0" : "none", nullptr);
    if (!ids.empty()) {
      std::vector<std::string> names(size_t(ids.back()) + 1);  // indexed by pixel value
      for (int id : ids) names[size_t(id)] = style.name(id);
      std::vector<char*> list;
      for (auto& n : names) list.push_back(n.data());
      list.push_back(nullptr);
      if (GDALSetRasterCategoryNames(band, list.data()) != CE_None)
        throw Error("cannot set the category names: " + gdal_error());
    }
    set_attribute_table(band, style, ids, counts);
  } catch (const Error& e) {
    GDALClose(ds);
    throw Error(name + ": " + e.what());
  }
  CPLErrorReset();
  GDALClose(ds);
  if (CPLGetLastErrorType() >= CE_Failure) throw Error(name + ": naming the classes failed: " + gdal_error());
}

// A file GDAL wrote beside another (an .aux.xml): removed on scope exit unless moved into place.
class SideFile {
 public:
  explicit SideFile(std::string path) : path_(std::move(path)) {}
  ~SideFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  SideFile(const SideFile&) = delete;
  SideFile& operator=(const SideFile&) = delete;
  /// Moves the file to `final_path` (staged: renamed into place). Throws when GDAL wrote none.
  void commit_as(const std::string& final_path) const {
    if (!fs::exists(path_)) throw Error(final_path + ": GDAL wrote no " + path_);
    StagedFile out(final_path);
    std::error_code ec;
    fs::rename(path_, out.path(), ec);
    if (ec) throw Error(final_path + ": cannot move " + path_ + ": " + ec.message());
    out.commit();
  }

 private:
  std::string path_;
};

}  // namespace

std::string LabelStyle::name(int id) const {
  if (id >= 0 && size_t(id) < class_names.size() && !class_names[size_t(id)].empty()) return class_names[size_t(id)];
  return "class " + std::to_string(id);
}

void LabelStyle::validate() const {
  if (classes < 0 || classes > kNoDataLabel)
    throw Error("classes: must be in 0.." + std::to_string(kNoDataLabel) + ", got " + std::to_string(classes));
  if (class_names.size() > size_t(kNoDataLabel))
    throw Error("class_names: at most " + std::to_string(kNoDataLabel) + " names (" + std::to_string(kNoDataLabel) +
                " is nodata), got " + std::to_string(class_names.size()));
}

bool wants_cog(const std::string& path, bool cog) {
  return cog || ends_with_nocase(path, ".cog.tif") || ends_with_nocase(path, ".cog.tiff");
}

std::string label_background(const std::string& path) {
  ensure_gdal();
  CPLPushErrorHandler(CPLQuietErrorHandler);
  GDALDatasetH ds = GDALOpenEx(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  CPLPopErrorHandler();
  if (!ds) return "";
  const char* value = GDALGetMetadataItem(ds, kBackgroundKey, nullptr);
  std::string background = value ? value : "";
  GDALClose(ds);
  return background;
}

std::string qml_sidecar_path(const std::string& raster) {
  return (fs::path(raster).parent_path() / fs::path(raster).stem()).string() + ".qml";
}

std::string qgis_label_style(const LabelStyle& style, const std::array<bool, 256>& present) {
  std::string entries;
  for (int id : listed_ids(style, present))
    entries += "        <paletteEntry value=\"" + std::to_string(id) + "\" color=\"" + hex_color(style.color(id)) +
               "\" alpha=\"255\" label=\"" + xml_escaped(style.name(id)) + "\"/>\n";
  return "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
         "<qgis version=\"3.28.0\" styleCategories=\"Symbology\">\n"
         "  <pipe>\n"
         "    <rasterrenderer type=\"paletted\" band=\"1\" opacity=\"1\" alphaBand=\"-1\" nodataColor=\"\">\n"
         "      <rasterTransparency/>\n"
         "      <colorPalette>\n" +
         entries +
         "      </colorPalette>\n"
         "    </rasterrenderer>\n"
         "    <brightnesscontrast brightness=\"0\" contrast=\"0\" gamma=\"1\"/>\n"
         "    <huesaturation saturation=\"0\" grayscaleMode=\"0\" colorizeOn=\"0\"/>\n"
         "    <rasterresampler maxOversampling=\"2\"/>\n"
         "  </pipe>\n"
         "  <blendMode>0</blendMode>\n"
         "</qgis>\n";
}

void restyle_label_raster(const std::string& path, const LabelStyle& style) {
  style.validate();
  ensure_gdal();
  CPLErrorReset();
  GDALDatasetH source = GDALOpen(path.c_str(), GA_ReadOnly);
  if (!source) throw Error(path + ": cannot open the labels to restyle: " + gdal_error());
  const char* argv[] = {"-of", "GTiff", "-co", "TILED=YES", "-co", "BLOCKXSIZE=256", "-co", "BLOCKYSIZE=256",
                        "-co", "COMPRESS=DEFLATE", "-co", "BIGTIFF=IF_SAFER", nullptr};
  GDALTranslateOptions* options = GDALTranslateOptionsNew(const_cast<char**>(argv), nullptr);
  StagedFile plain(path);  // no extension: a COG is staged under <path>.partial-<pid>.cog.tif
  GDALDatasetH copy = GDALTranslate(plain.path().c_str(), source, options, nullptr);
  GDALTranslateOptionsFree(options);
  GDALClose(source);
  if (!copy) throw Error(path + ": cannot copy the labels to restyle: " + gdal_error());
  detail::set_label_colour_table(GDALGetRasterBand(copy, 1), style.class_colors);
  GDALClose(copy);
  detail::publish_label_raster(plain, style, detail::count_labels(plain.path(), path));
}

namespace detail {

PamScope::PamScope() {
  if (const char* v = CPLGetThreadLocalConfigOption("GDAL_PAM_ENABLED", nullptr)) previous_ = v;
  CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", "YES");
}

PamScope::~PamScope() {
  CPLSetThreadLocalConfigOption("GDAL_PAM_ENABLED", previous_ ? previous_->c_str() : nullptr);
}

LabelCounts count_labels(const std::string& path, const std::string& name) {
  CPLErrorReset();
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  if (!ds) throw Error(name + ": cannot open to count the labels: " + gdal_error());
  GDALRasterBandH band = GDALGetRasterBand(ds, 1);
  const int width = GDALGetRasterXSize(ds), height = GDALGetRasterYSize(ds);
  int bw = 0, bh = 0;
  GDALGetBlockSize(band, &bw, &bh);
  const int rows = std::max(1, bh);  // one row of blocks at a time
  std::vector<uint8_t> strip(size_t(width) * rows);
  LabelCounts counts{};
  for (int y = 0; y < height; y += rows) {
    const int h = std::min(rows, height - y);
    if (GDALRasterIO(band, GF_Read, 0, y, width, h, strip.data(), width, h, GDT_Byte, 0, 0) != CE_None) {
      GDALClose(ds);
      throw Error(name + ": counting the labels failed at row " + std::to_string(y) + ": " + gdal_error());
    }
    for (size_t i = 0; i < size_t(width) * h; ++i) ++counts[strip[i]];
  }
  GDALClose(ds);
  return counts;
}

void translate_to_cog(const std::string& source, const std::string& target, const char* resampling, bool predictor,
                      const std::string& name) {
  PamScope pam;
  CPLErrorReset();
  GDALDatasetH src = GDALOpen(source.c_str(), GA_ReadOnly);
  if (!src) throw Error(name + ": cannot open the finished GeoTIFF for the COG: " + gdal_error());
  const std::string overviews = std::string("OVERVIEW_RESAMPLING=") + resampling;
  std::vector<const char*> argv = {"-of", "COG", "-co", "COMPRESS=DEFLATE", "-co", "BLOCKSIZE=256",
                                   "-co", overviews.c_str(), "-co", "BIGTIFF=IF_SAFER"};
  if (predictor) argv.insert(argv.end(), {"-co", "PREDICTOR=YES"});
  argv.push_back(nullptr);
  GDALTranslateOptions* options = GDALTranslateOptionsNew(const_cast<char**>(argv.data()), nullptr);
  GDALDatasetH cog = GDALTranslate(target.c_str(), src, options, nullptr);
  GDALTranslateOptionsFree(options);
  GDALClose(src);
  if (!cog) throw Error(name + ": cannot write the Cloud-Optimized GeoTIFF: " + gdal_error());
  CPLErrorReset();
  GDALClose(cog);
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(name + ": finishing the Cloud-Optimized GeoTIFF failed: " + gdal_error());
}

void publish_label_raster(StagedFile& gtiff, const LabelStyle& style, const LabelCounts& counts) {
  const std::string& final_path = gtiff.final_path();
  const bool cog = wants_cog(final_path, style.cog);
  PamScope pam;
  SideFile aux(gtiff.path() + ".aux.xml");
  if (style.describe) describe_classes(gtiff.path(), final_path, style, counts);
  std::optional<StagedFile> cog_file;
  std::optional<SideFile> cog_aux;
  if (cog) {
    cog_file.emplace(final_path, ".cog.tif");  // never the GeoTIFF's temporary name
    cog_aux.emplace(cog_file->path() + ".aux.xml");
    translate_to_cog(gtiff.path(), cog_file->path(), "MODE", false, final_path);
  }
  const std::string qml = qml_sidecar_path(final_path), aux_final = final_path + ".aux.xml";
  try {
    if (style.describe) {  // sidecars first: the raster's arrival says everything is in place
      write_file_atomically(qml, {qgis_label_style(style, present_of(counts))});
      (cog ? *cog_aux : aux).commit_as(aux_final);
    }
    (cog ? *cog_file : gtiff).commit();
  } catch (const Error&) {  // no sidecars without their raster
    std::error_code ignored;
    if (style.describe) {
      fs::remove(qml, ignored);
      fs::remove(aux_final, ignored);
    }
    throw;
  }
  if (cog) gtiff.discard();
}

}  // namespace detail
}  // namespace tessera::io
