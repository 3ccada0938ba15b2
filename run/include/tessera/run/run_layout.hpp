#pragma once
// The files of a run directory, written down once. Every writer (the trainer, sample-parallel
// inference, the device monitor) and every reader (tessera-view) asks a RunLayout for its
// paths, so the viewer reads exactly what the writers write:
//
//   RUN/config.yaml                          the resolved configuration (train)
//   RUN/metrics.jsonl                        one JSON object per step / epoch
//   RUN/checkpoints/last.pt, best.pt, step-NNNNNN.pt
//   RUN/telemetry/rank-N.jsonl               per-rank device samples
//   RUN/tiles/<output name>/                 one tile set per inference output (its file name):
//       tile_set.json                          what the tiles belong to (TileSetRecord)
//       tile-NNNNNNN.tif  (.nrrd for volumes)  finished tiles, each a georeferenced inset
//       mosaic.vrt                             the tiles as one raster, once all are done
//
// Files are written staged (tessera/run/staged_file.hpp: a temporary with ".partial" in its name);
// the listings below skip such names, so a reader never sees half a file.
// Paths are plain strings (absolute or relative, as the run directory was given). Path
// functions do no I/O; listing and record functions read the disk and are safe to call from
// any thread (the viewer calls them from workers). Torch-free: the viewer links this.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

/// What a tile set is made from: written by inference before its first tile.
struct TileSetRecord {
  std::string input;   ///< the input image, absolute path
  std::string output;  ///< the stitched output, absolute path (exists once all tiles are done)
  int64_t tiles = 0;   ///< tiles in the grid (the set is complete when all are finished)
};

/// One folder RUN/tiles/<output name>/.
class TileSetLayout {
 public:
  explicit TileSetLayout(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  /// "tile-0000042" + extension (".tif" for rasters, ".nrrd" for volumes).
  std::string tile(int64_t index, std::string_view extension) const;
  std::string record() const;  ///< tile_set.json
  std::string mosaic() const;  ///< mosaic.vrt

  /// Finished tiles (tile-<digits>.<ext>, no temporaries), sorted; empty when the folder is absent.
  std::vector<std::string> finished_tiles() const;
  /// Writes the record atomically. Throws tessera::Error naming the file.
  void write_record(const TileSetRecord& record) const;
  /// The record, nullopt when absent. Throws tessera::Error naming the file when damaged.
  std::optional<TileSetRecord> read_record() const;

 private:
  std::string dir_;
};

class RunLayout {
 public:
  explicit RunLayout(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  std::string config() const;
  std::string metrics() const;
  std::string checkpoints_dir() const;
  std::string last_checkpoint() const;
  std::string best_checkpoint() const;
  std::string step_checkpoint(int64_t step) const;  ///< step-NNNNNN.pt
  std::string telemetry_dir() const;
  std::string telemetry(int rank) const;            ///< rank-N.jsonl
  std::string tiles_dir() const;
  /// The tile set of an output path: RUN/tiles/<file name of output>.
  TileSetLayout tile_set(const std::string& output) const;

  /// Every finished checkpoint (*.pt: last, best, step-…), sorted by name.
  std::vector<std::string> checkpoints() const;
  /// step-NNNNNN.pt checkpoints, oldest first.
  std::vector<std::string> step_checkpoints() const;
  /// Telemetry files with their rank, by rank.
  std::vector<std::pair<int, std::string>> telemetry_files() const;
  /// Every RUN/tiles/<name>/ folder, sorted by name.
  std::vector<TileSetLayout> tile_sets() const;

  /// Whether a file name is a temporary (".partial" in it) that readers must skip.
  static bool is_temporary(std::string_view file_name);
  /// The rank of a telemetry file name "rank-N.jsonl", nullopt for any other name.
  static std::optional<int> telemetry_rank(std::string_view file_name);

 private:
  std::string dir_;
};

}  // namespace tessera
