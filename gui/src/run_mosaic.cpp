#include "run_mosaic.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_utils.h>

#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::gui {
namespace fs = std::filesystem;

RunOutputs find_run_outputs(const std::string& run_dir) {
  RunOutputs out;
  const fs::path run = run_dir;
  std::error_code ec;
  if (fs::exists(run / "labels.tif", ec)) out.stitched = (run / "labels.tif").string();
  if (fs::is_directory(run / "tiles", ec)) {
    out.tiles_dir = (run / "tiles").string();
    for (const auto& e : fs::directory_iterator(run / "tiles", ec)) {
      const std::string ext = e.path().extension().string();
      // Finished tiles only: writers use a temporary name (e.g. *.partial-*) until done.
      if (ext == ".tif" || ext == ".tiff") out.tiles.push_back(e.path().string());
    }
    std::sort(out.tiles.begin(), out.tiles.end());
  }
  std::ifstream config(run / "config.yaml");
  static const std::regex image_line(R"(^\s*-?\s*(image|input):\s*["']?([^"'\s]+)["']?\s*$)");
  static const std::regex names_line(R"(^\s*class_names:\s*\[(.*)\]\s*$)");
  std::string line;
  std::smatch m;
  while (std::getline(config, line)) {
    if (std::regex_match(line, m, names_line)) {
      std::stringstream list(m[1].str());
      std::string name;
      while (std::getline(list, name, ',')) {
        const auto a = name.find_first_not_of(" \t\"'"), b = name.find_last_not_of(" \t\"'");
        out.class_names.push_back(a == std::string::npos ? std::string() : name.substr(a, b - a + 1));
      }
      continue;
    }
    if (!out.image.empty() || !std::regex_match(line, m, image_line)) continue;
    const fs::path named = m[2].str();
    for (const fs::path& base : {fs::path(), fs::current_path(ec), run, run.parent_path(),
                                 run.parent_path().parent_path(), run.parent_path().parent_path() / "sample_data"}) {
      const fs::path candidate = named.is_absolute() ? named : base / named;
      if (fs::is_regular_file(candidate, ec)) {
        out.image = candidate.string();
        break;
      }
    }
  }
  return out;
}

std::string build_tile_mosaic(const std::vector<std::string>& tiles, const std::string& like_image) {
  io::init_gdal(64ll << 20);
  static std::atomic<int> counter{0};
  const std::string path = "/vsimem/tessera-view-mosaic-" + std::to_string(counter++) + ".vrt";
  GDALDatasetH like = GDALOpen(like_image.c_str(), GA_ReadOnly);
  if (!like) throw Error(like_image + ": cannot open to place the run's tiles");
  double gt[6];
  const bool has_gt = GDALGetGeoTransform(like, gt) == CE_None;
  const int w = GDALGetRasterXSize(like), h = GDALGetRasterYSize(like);
  GDALClose(like);
  if (!has_gt) gt[0] = 0, gt[1] = 1, gt[2] = 0, gt[3] = 0, gt[4] = 0, gt[5] = -1;
  if (gt[2] != 0 || gt[4] != 0) throw Error(like_image + ": rotated rasters cannot be mosaicked from tiles");
  const double x0 = gt[0], x1 = gt[0] + w * gt[1], y0 = gt[3], y1 = gt[3] + h * gt[5];
  std::vector<std::string> args = {"-te",
                                   std::to_string(std::min(x0, x1)),
                                   std::to_string(std::min(y0, y1)),
                                   std::to_string(std::max(x0, x1)),
                                   std::to_string(std::max(y0, y1)),
                                   "-tr",
                                   std::to_string(std::abs(gt[1])),
                                   std::to_string(std::abs(gt[5])),
                                   "-vrtnodata",
                                   "255",
                                   "-srcnodata",
                                   "255"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  GDALBuildVRTOptions* options = GDALBuildVRTOptionsNew(argv.data(), nullptr);
  std::vector<const char*> names;
  for (const auto& t : tiles) names.push_back(t.c_str());
  int usage_error = 0;
  CPLErrorReset();
  GDALDatasetH vrt = GDALBuildVRT(path.c_str(), int(names.size()), nullptr, names.data(), options, &usage_error);
  GDALBuildVRTOptionsFree(options);
  if (!vrt) {
    const char* msg = CPLGetLastErrorMsg();
    throw Error("run tiles: cannot build a mosaic: " + std::string(msg && *msg ? msg : "GDAL error"));
  }
  GDALClose(vrt);
  return path;
}

void release_tile_mosaic(const std::string& path) {
  if (path.rfind("/vsimem/", 0) == 0) VSIUnlink(path.c_str());
}

}  // namespace tessera::gui
