#include "tessera/engine/image_info.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/io/dicom_series.hpp"
#include "tessera/io/dicomweb.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::engine {
namespace {

nlohmann::json to_json(const ImageInfo& i) {
  nlohmann::json j{{"path", i.path},           {"kind", i.kind},     {"format", i.format},
                   {"data_type", i.data_type}, {"size", i.extent},   {"channels", i.channels}};
  nlohmann::json nodata = nlohmann::json::array();
  for (const auto& v : i.nodata) nodata.push_back(v ? nlohmann::json(*v) : nlohmann::json(nullptr));
  j["nodata"] = nodata;
  if (i.kind == "raster") {
    j["crs_wkt"] = i.geo.crs_wkt;
    j["geotransform"] = i.geo.geotransform;
  } else {
    j["spacing"] = i.geo.spacing;
    j["origin"] = i.geo.origin;
    j["direction"] = i.geo.direction;
  }
  return j;
}

nlohmann::json to_json(const io::DicomSeriesSummary& s) {
  return {{"uid", s.uid}, {"description", s.description}, {"modality", s.modality}, {"slices", s.slices}};
}

nlohmann::json to_json(const io::DicomReadSummary& d) {
  nlohmann::json j = to_json(d.series);
  j["how"] = d.how;
  j["window"] = d.window ? nlohmann::json{{"center", d.window->center}, {"width", d.window->width}} : nlohmann::json(nullptr);
  return j;
}

// A folder of several DICOM series: the list to choose from, or nullopt when it is not one.
std::optional<std::vector<io::DicomSeriesSummary>> several_series(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::nullopt;
  auto series = io::list_dicom_series(path);
  if (series.size() < 2) return std::nullopt;
  return series;
}

void print_series_list(const std::string& path, const std::vector<io::DicomSeriesSummary>& series, bool json,
                       const std::string& choose = "--series UID") {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : series) list.push_back(to_json(s));
    std::cout << nlohmann::json{{"path", path}, {"kind", "dicom series list"}, {"series", list}}.dump(2) << '\n';
    return;
  }
  std::printf("%s\n  %zu DICOM series; choose one with %s:\n", path.c_str(), series.size(), choose.c_str());
  for (const auto& s : series) std::printf("  series    %s\n", io::describe(s).c_str());
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ", ") + fmt_double(x);
  return s;
}

void print_text(const ImageInfo& i, const io::DicomReadSummary* dicom) {
  std::printf("%s\n  kind      %s (%s)\n  size      ", i.path.c_str(), i.kind.c_str(), i.format.c_str());
  for (size_t a = i.extent.size(); a-- > 0;)  // x first, as GDAL and nibabel print it
    std::printf("%lld%s", (long long)i.extent[a], a ? " x " : "");
  std::printf(i.kind == "raster" ? " (columns x rows)\n" : " (columns x rows x slices)\n");
  std::printf("  channels  %d\n  type      %s\n", i.channels, i.data_type.c_str());
  std::string nodata;
  for (size_t c = 0; c < i.nodata.size(); ++c)
    nodata += (c ? ", " : "") + (i.nodata[c] ? fmt_double(*i.nodata[c]) : std::string("none"));
  std::printf("  nodata    %s\n", nodata.empty() ? "none" : nodata.c_str());
  if (i.kind == "raster") {
    std::printf("  geotransform  %s\n", i.geo.geotransform.empty() ? "(none)" : join(i.geo.geotransform).c_str());
    std::printf("  crs       %s\n", i.geo.crs_wkt.empty() ? "(none)" : i.geo.crs_wkt.c_str());
  } else {
    std::printf("  spacing   %s mm\n  origin    %s mm (LPS)\n  direction %s\n", join(i.geo.spacing).c_str(),
                join(i.geo.origin).c_str(), join(i.geo.direction).c_str());
  }
  if (dicom) {
    std::printf("  series    %s: %s\n", io::describe(dicom->series).c_str(), dicom->how.c_str());
    if (dicom->window)
      std::printf("  window    centre %s, width %s (stored)\n", fmt_double(dicom->window->center).c_str(),
                  fmt_double(dicom->window->width).c_str());
  }
}

}  // namespace

void ImageInfoOptions::validate() const {
  if (path.empty()) throw Error("info: PATH (or --path) is required");
}

void print_image_info(const ImageInfoOptions& o) {
  o.validate();
  if (io::is_dicomweb(o.path)) {  // a study on a PACS: its series, by QIDO-RS
    const io::DicomWebAddress study = io::parse_dicomweb(o.path, "info");
    return print_series_list(o.path, io::DicomWebClient(study, "info").series(), o.json,
                             "--input " + o.path.substr(0, o.path.find("/series/")) + "/series/UID");
  }
  std::unique_ptr<ImageSource> image;
  try {
    image = io::open_image(o.path, io::ImageOpenOptions().with_series_uid(o.series));
  } catch (const Error&) {
    if (o.series.empty())
      if (const auto list = several_series(o.path)) return print_series_list(o.path, *list, o.json);
    throw;
  }
  const ImageInfo& i = image->info();
  const auto* volume = dynamic_cast<const io::VolumeReader*>(image.get());
  const auto* dicom = volume && volume->dicom() ? &*volume->dicom() : nullptr;
  if (!o.json) return print_text(i, dicom);
  nlohmann::json j = to_json(i);
  if (dicom) j["dicom"] = to_json(*dicom);
  std::cout << j.dump(2) << '\n';
}

}  // namespace tessera::engine
