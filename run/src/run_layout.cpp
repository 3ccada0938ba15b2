#include "tessera/run/run_layout.hpp"
#include "tessera/run/staged_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string join(const std::string& dir, std::string_view name) { return (fs::path(dir) / name).string(); }

// Regular files of `dir` whose name matches `pattern`, temporaries left out, sorted by name.
std::vector<std::string> list_files(const std::string& dir, const std::regex& pattern) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!RunLayout::is_temporary(name) && std::regex_match(name, pattern) && it->is_regular_file(ec))
      out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string TileSetLayout::tile(int64_t index, std::string_view extension) const {
  char name[32];
  std::snprintf(name, sizeof name, "tile-%07lld", static_cast<long long>(index));
  return join(dir_, std::string(name) + std::string(extension));
}

std::string TileSetLayout::record() const { return join(dir_, "tile_set.json"); }
std::string TileSetLayout::mosaic() const { return join(dir_, "mosaic.vrt"); }

std::vector<std::string> TileSetLayout::finished_tiles() const {
  static const std::regex tile_name(R"(tile-\d+\.[A-Za-z]+)");
  return list_files(dir_, tile_name);
}

void TileSetLayout::write_record(const TileSetRecord& r) const {
  const std::string text = nlohmann::json{{"input", r.input}, {"output", r.output}, {"tiles", r.tiles}}.dump() + "\n";
  write_file_atomically(record(), {text});
}

std::optional<TileSetRecord> TileSetLayout::read_record() const {
  const std::string path = record();
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    const auto j = nlohmann::json::parse(text.str());
    return TileSetRecord{j.at("input").get<std::string>(), j.at("output").get<std::string>(),
                         j.at("tiles").get<int64_t>()};
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": damaged tile set record (" + e.what() + ")");
  }
}

std::string RunLayout::config() const { return join(dir_, "config.yaml"); }
std::string RunLayout::metrics() const { return join(dir_, "metrics.jsonl"); }
std::string RunLayout::checkpoints_dir() const { return join(dir_, "checkpoints"); }
std::string RunLayout::last_checkpoint() const { return join(checkpoints_dir(), "last.pt"); }
std::string RunLayout::best_checkpoint() const { return join(checkpoints_dir(), "best.pt"); }

std::string RunLayout::step_checkpoint(int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld.pt", static_cast<long long>(step));
  return join(checkpoints_dir(), name);
}

std::string RunLayout::telemetry_dir() const { return join(dir_, "telemetry"); }
std::string RunLayout::telemetry(int rank) const { return join(telemetry_dir(), "rank-" + std::to_string(rank) + ".jsonl"); }
std::string RunLayout::tiles_dir() const { return join(dir_, "tiles"); }

TileSetLayout RunLayout::tile_set(const std::string& output) const {
  return TileSetLayout(join(tiles_dir(), fs::path(output).filename().string()));
}

std::vector<std::string> RunLayout::checkpoints() const {
  static const std::regex any_checkpoint(R"(.+\.pt)");
  return list_files(checkpoints_dir(), any_checkpoint);
}

std::vector<std::string> RunLayout::step_checkpoints() const {
  static const std::regex step_name(R"(step-\d+\.pt)");
  return list_files(checkpoints_dir(), step_name);  // zero-padded: name order is step order
}

std::vector<std::pair<int, std::string>> RunLayout::telemetry_files() const {
  static const std::regex rank_name(R"(rank-\d{1,9}\.jsonl)");
  std::vector<std::pair<int, std::string>> out;
  for (const std::string& f : list_files(telemetry_dir(), rank_name))
    out.emplace_back(*telemetry_rank(fs::path(f).filename().string()), f);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<TileSetLayout> RunLayout::tile_sets() const {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (fs::directory_iterator it(tiles_dir(), ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !is_temporary(it->path().filename().string())) dirs.push_back(it->path().string());
  std::sort(dirs.begin(), dirs.end());
  return {dirs.begin(), dirs.end()};
}

bool RunLayout::is_temporary(std::string_view file_name) { return file_name.find(".partial") != std::string_view::npos; }

std::optional<int> RunLayout::telemetry_rank(std::string_view file_name) {
  static const std::regex rank_name(R"(rank-(\d{1,9})\.jsonl)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(file_name.begin(), file_name.end(), m, rank_name)) return std::nullopt;
  return std::stoi(m[1].str());
}

}  // namespace tessera
