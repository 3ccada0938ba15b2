// tessera info FILE|DIR [--json]: what an image is and where it sits in the world.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::cli {
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

}  // namespace

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a raster or volume: size, bands, type, CRS or spacing");
  static std::string path;
  static bool json = false;
  cmd->add_option("path", path, "GeoTIFF/VRT/any GDAL raster, NIfTI/NRRD/MHA, or a DICOM series folder")->required();
  cmd->add_flag("--json", json, "Print JSON instead of text");
  cmd->callback([] {
    auto image = io::open_image(path);
    const ImageInfo& i = image->info();
    if (json) {
      std::cout << to_json(i).dump(2) << '\n';
      return;
    }
    std::printf("%s\n  kind      %s (%s)\n  size      ", i.path.c_str(), i.kind.c_str(), i.format.c_str());
    for (size_t a = 0; a < i.extent.size(); ++a) std::printf("%s%lld", a ? " x " : "", (long long)i.extent[a]);
    std::printf(i.kind == "raster" ? " (rows x columns)\n" : " (slices x rows x columns)\n");
    std::printf("  channels  %d\n  type      %s\n", i.channels, i.data_type.c_str());
    if (i.kind == "raster") {
      std::printf("  geotransform  %s\n", i.geo.geotransform.empty() ? "(none)" : join(i.geo.geotransform).c_str());
      std::printf("  crs       %s\n", i.geo.crs_wkt.empty() ? "(none)" : i.geo.crs_wkt.substr(0, 100).c_str());
    } else {
      std::printf("  spacing   %s mm\n  origin    %s mm (LPS)\n  direction %s\n", join(i.geo.spacing).c_str(),
                  join(i.geo.origin).c_str(), join(i.geo.direction).c_str());
    }
  });
}

}  // namespace tessera::cli
