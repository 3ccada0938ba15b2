#include "run_mosaic.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "raster_pyramid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/mosaic.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera::gui {
namespace fs = std::filesystem;

namespace {

// The training image and class names of a run's config.yaml (block or flow style). `tessera
// train` writes absolute paths there; a relative image (an older run) is looked up where train
// resolved it (next to the config it was given, usually the run directory's parent), in the
// working directory, and in sample_data/. An image found nowhere is named in out.problem.
void read_config(const RunLayout& run, RunOutputs& out) {
  std::ifstream config(run.config());
  static const std::regex image_key(R"((?:^|[\s{,-])(image|input):\s*["']?([^"',}\]\s]+))");
  static const std::regex names_line(R"(^\s*class_names:\s*\[(.*)\]\s*$)");
  const fs::path dir = run.dir();
  std::error_code ec;
  std::string line, missing;
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
      if (fs::exists(candidate, ec)) {  // a file, or a DICOM series' folder
        out.image = candidate.string();
        break;
      }
    }
    // Other keys spelt `image` hold words (data.resample.image: linear): a path has a / or a dot.
    if (out.image.empty() && missing.empty() && named.string().find_first_of("/.") != std::string::npos)
      missing = named.string();
  }
  if (out.image.empty() && !missing.empty())
    out.problem = run.config() + " names the image " + missing + ", which does not exist" +
                  (fs::path(missing).is_absolute() ? "" : " (looked next to the run, in its parents and the working directory)");
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
  io::init_gdal(kViewerCacheBytes);
  const ImageInfo like = io::RasterReader(like_image).info();
  const std::string path = io::memory_mosaic_path();
  io::build_mosaic_vrt(path, tiles, like);
  return path;
}

void release_tile_mosaic(const std::string& path) { io::release_memory_mosaic(path); }

}  // namespace tessera::gui
