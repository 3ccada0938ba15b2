#pragma once
// What the viewer shows for a run directory, whose files are described once in
// tessera/run/run_layout.hpp (the same description the writers use):
//  - an inference run: the newest tile set RUN/tiles/<output name>/, its finished tiles as a
//    mosaic on the grid of the input image named by the set's tile_set.json, growing while
//    the run writes tiles; when every tile is there the mosaic is the run's output;
//  - a training run: the training image named by config.yaml, and what the run holds
//    (metrics lines, checkpoints, telemetry ranks) for the status line.
// Pure file logic, no widgets; call from a worker thread (it reads the disk). The mosaic is
// io's (tessera/io/mosaic.hpp), the one the run's own assembly uses.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::gui {

struct RunOutputs {
  std::string image;                     ///< input of the tile set, else config.yaml's image; empty if none exists
  std::string tile_set;                  ///< newest RUN/tiles/<name>/, empty when none
  std::string output;                    ///< the tile set's final output (may not exist yet)
  std::vector<std::string> tiles;        ///< finished raster tiles of tile_set, sorted
  int64_t tiles_total = 0;               ///< tiles in the grid; 0 when unknown
  std::vector<std::string> class_names;  ///< config.yaml "class_names: [a, b, …]", by label id
  std::vector<std::string> checkpoints;  ///< file names in RUN/checkpoints/, sorted
  int64_t metrics_lines = -1;            ///< lines of RUN/metrics.jsonl; -1 when absent
  int telemetry_ranks = 0;               ///< RUN/telemetry/rank-N.jsonl files
  std::vector<std::string> watch;        ///< existing folders whose changes call for a reload
  std::string problem;                   ///< why the tiles cannot be shown (one line), or empty

  /// Every tile of the grid is finished: the mosaic equals the run's output.
  bool tiles_complete() const { return tiles_total > 0 && int64_t(tiles.size()) >= tiles_total; }
};

RunOutputs find_run_outputs(const std::string& run_dir);
/// One status line: tiles finished of total, metrics, checkpoints, telemetry ranks.
std::string describe_run(const std::string& run_dir, const RunOutputs& out);

/// Builds io's VRT mosaic of `tiles` on the grid of `like_image` (same size and geotransform,
/// north-up) at a fresh in-memory path, and returns that path. Throws tessera::Error.
std::string build_tile_mosaic(const std::vector<std::string>& tiles, const std::string& like_image);
/// Frees a mosaic made by build_tile_mosaic (once no reader has it open).
void release_tile_mosaic(const std::string& path);

}  // namespace tessera::gui
