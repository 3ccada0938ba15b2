#include "run_mosaic.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <cpl_error.h>
#include <cpl_vsi.h>
#include <gdal.h>
#include <gdal_utils.h>

#include "tessera/core/error.hpp"
#include "tessera/core/run_layout.hpp"
#include "tessera/io/raster.hpp"

namespace tessera::gui {
namespace fs = std::filesystem;

namespace {

// The training image and class names of a run's config.yaml (block or flow style). A relative
// image is looked up where `tessera train` resolves it (next to the config it was given, which
// is usually the run directory's parent), in the working directory, and in sample_data/.
void read_config(const RunLayout& run, RunOutputs& out) {
  std::ifstream config(run.config());
  static const std::regex image_key(R"((?:^|[\s{,-])(image|input):\s*["']?([^"',}\]\s]+))");
  static const std::regex names_line(R"(^\s*class_names:\s*\[(.*)\]\s*$)");
  const fs::path dir = run.dir();
  std::error_code ec;
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
    if (!out.image.empty() || !std::regex_search(line, m, image_key)) continue;
    const fs::path named = m[2].str();
    for (const fs::path& base : {fs::path(), fs::current_path(ec), dir, dir.parent_path(),
                                 dir.parent_path().parent_path(), dir.parent_path().parent_path() / "sample_data"}) {
      const fs::path candidate = named.is_absolute() ? named : base / named;
      if (fs::is_regular_file(candidate, ec)) {
        out.image = candidate.string();
        break;
      }
    }
  }
}

// The tile set written to last (a run may hold several outputs; the live one is the newest).
std::optional<TileSetLayout> newest_tile_set(const RunLayout& run) {
  std::optional<TileSetLayout> newest;
  fs::file_time_type newest_time{};
  std::error_code ec;
  for (const TileSetLayout& set : run.tile_sets()) {
    const auto t = fs::last_write_time(set.dir(), ec);
    if (!ec && (!newest || t >= newest_time)) newest = set, newest_time = t;
  }
  return newest;
}

void read_tile_set(const TileSetLayout& set, RunOutputs& out) {
  out.tile_set = set.dir();
  out.watch.push_back(set.dir());
  try {
    if (const auto record = set.read_record()) {
      out.output = record->output;
      out.tiles_total = record->tiles;
      std::error_code ec;
      if (fs::is_regular_file(record->input, ec))
        out.image = record->input;
      else
        out.problem = set.record() + ": its input " + record->input + " does not exist; cannot place the tiles";
    }
  } catch (const std::exception& e) {
    out.problem = e.what();
  }
  for (std::string& tile : set.finished_tiles()) {
    const std::string ext = fs::path(tile).extension().string();
    if (ext == ".tif" || ext == ".tiff")
      out.tiles.push_back(std::move(tile));
    else if (out.problem.empty())
      out.problem = set.dir() + ": volume tiles are not shown live; open the output once it is written";
  }
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return -1;
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace

RunOutputs find_run_outputs(const std::string& run_dir) {
  const RunLayout run(run_dir);
  RunOutputs out;
  std::error_code ec;
  for (const std::string& dir : {run.dir(), run.tiles_dir()})
    if (fs::is_directory(dir, ec)) out.watch.push_back(dir);
  if (const auto set = newest_tile_set(run)) read_tile_set(*set, out);
  const std::string tile_image = out.image;
  read_config(run, out);
  if (!tile_image.empty()) out.image = tile_image;  // the tiles sit on their own input's grid
  for (const std::string& path : run.checkpoints()) out.checkpoints.push_back(fs::path(path).filename().string());
  out.metrics_lines = count_lines(run.metrics());
  out.telemetry_ranks = int(run.telemetry_files().size());
  return out;
}

std::string describe_run(const std::string& run_dir, const RunOutputs& out) {
  std::string text = "run " + run_dir + ":";
  if (!out.tile_set.empty()) {
    text += " " + fs::path(out.tile_set).filename().string() + " " + std::to_string(out.tiles.size());
    if (out.tiles_total > 0) text += " of " + std::to_string(out.tiles_total);
    text += " tile(s) finished;";
  }
  if (out.metrics_lines >= 0) text += " metrics.jsonl " + std::to_string(out.metrics_lines) + " line(s);";
  if (!out.checkpoints.empty()) {
    text += " checkpoints";
    for (size_t i = 0; i < out.checkpoints.size(); ++i) text += (i ? ", " : " ") + out.checkpoints[i];
    text += ";";
  }
  text += " telemetry " + std::to_string(out.telemetry_ranks) + " rank(s)";
  if (!out.problem.empty()) text += " — " + out.problem;
  return text;
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
