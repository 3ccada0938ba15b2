#pragma once
// Which tile inset S `tessera infer` uses (core/inference.hpp), and why.
//
// A fixed side (`--tile N`) or `auto`: the largest aligned side whose predicted peak memory
// fits a budget. Either way the tile is clamped per axis to the image rounded up to the
// pooling alignment 2^(L-1) (clamped_steps in tile_grid.hpp), so a small image is one tile
// of about its own size. The prediction is a callback (the planner's inference memory model,
// parallel/planner.hpp: inference_bytes), so this file stays torch-free and testable.
// The choice depends only on the image extent, the model's alignment, the options and the
// callback: ranks that agree on those agree on the tile. Sides in pixels/voxels, axis order
// (y, x) or (z, y, x); memory in bytes. Thread safe (plain functions).
#include <cstdint>
#include <functional>
#include <string>

#include "tessera/core/geometry.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera {

/// Share of the available memory (MemAvailable, divided among the ranks of a node) that
/// `auto` may plan for when no budget is given: room for the page cache, the reader and
/// a misprediction of the model.
inline constexpr double kDefaultMemoryShare = 0.5;

struct TileChoiceOptions {
  int64_t tile = 0;           ///< inset side S asked for (a multiple of the alignment); 0: auto
  int64_t memory_budget = 0;  ///< bytes the process may use at its peak (auto only); 0: default_memory_budget()
  int64_t min_tiles = 1;      ///< auto: prefer sides leaving at least this many tiles (one per rank)

  TileChoiceOptions& with_tile(int64_t v) { tile = v; return *this; }
  TileChoiceOptions& with_memory_budget(int64_t v) { memory_budget = v; return *this; }
  TileChoiceOptions& with_min_tiles(int64_t v) { min_tiles = v; return *this; }

  /// Throws tessera::Error naming the bad field (--tile, --memory-budget, min_tiles).
  void validate() const;
};

/// `--tile` text: "auto" → 0, else a positive integer. Throws tessera::Error naming --tile.
int64_t parse_tile_option(const std::string& text);
/// `--memory-budget` text: a number with an optional unit B, KiB, MiB, GiB, TiB (or K, M,
/// G, T, KB, MB, GB, TB: binary all the same); a bare number is MiB. "2GiB", "1.5G", "800".
/// Throws tessera::Error naming --memory-budget.
int64_t parse_memory_size(const std::string& text);
/// "1.6 GiB", "512 MiB", "800 KiB", "12 B".
std::string format_bytes(int64_t bytes);

/// MemAvailable of /proc/meminfo, bytes. Throws tessera::Error when it cannot be read.
int64_t available_memory_bytes();
/// kDefaultMemoryShare × available_memory_bytes() / ranks_on_node.
int64_t default_memory_budget(int ranks_on_node = 1);

/// Predicted peak bytes of the process for tiles with these inset sides per axis (already
/// clamped to the image); may throw tessera::Error for a side the network cannot take.
using TileMemoryModel = std::function<int64_t(const Index& steps)>;

struct TileChoice {
  int64_t tile = 0;             ///< S passed to InferenceOptions::tile (clamped to the image)
  Index steps;                  ///< inset side per axis after clamping (TileGrid::steps())
  int64_t predicted_bytes = 0;  ///< the model's prediction for `steps` (auto only)
  int64_t budget_bytes = 0;     ///< the budget it was held to (0 for a fixed --tile)
  std::string reason;           ///< e.g. "auto: whole image, 40³ rounded up to 8"

  /// "tile 48 (auto: whole image, 40³ rounded up to 8)"; sides joined by × when they differ.
  std::string summary() const;
};

/// The tile for an image `extent` and a model of pooling `alignment`. Fixed: `tile`, clamped
/// (and said so when it was larger than the image). Auto: the largest aligned S up to the
/// largest axis rounded up whose prediction fits the budget (and that leaves min_tiles tiles
/// when the image allows); when even the smallest does not fit, the smallest, saying so.
/// Throws tessera::Error naming --tile when `tile` is off the alignment.
TileChoice choose_tile(const TileChoiceOptions& options, const Index& extent, int64_t alignment,
                       const TileMemoryModel& predicted_bytes);

/// The tile `tessera infer` runs `model` at: choose_tile() with the memory model's forward-only
/// prediction (memory_model.hpp's inference_bytes, `batch` tiles) on top of `baseline_bytes`
/// this process holds already.
TileChoice choose_tile(const TileChoiceOptions& options, const Index& extent, const UNetOptions& model, int batch,
                       int64_t baseline_bytes);

/// FLOPs of every tile of inset `tile` over `extent` / FLOPs of one forward pass over the whole
/// padded image (unet_whole_input): what exact tiling recomputes in its halos (InferenceReport::
/// recompute of a tiled run). 1 for `same` networks, whose tiles crop a halo instead.
double tile_recompute(const UNetOptions& model, const Index& extent, int64_t tile);

/// Output rows per band when `ranks` sample-parallel ranks share one streamed image
/// (InferenceOptions::band): its rows split evenly, rounded up to the alignment 2^(L-1) so
/// every band starts on the pooling grid; 0 (the whole image, one band) for one rank.
int64_t band_rows(const UNetOptions& model, const Index& extent, int ranks);

/// FLOPs of one pass over each band of `band` rows (its own padded input) / FLOPs of one pass
/// over the whole padded image: what the bands' halos recompute (a bound: a band's stream
/// stops at its last row). 1 for `band` 0.
double band_recompute(const UNetOptions& model, const Index& extent, int64_t band);

/// Streamed inference (core/stream_executor.hpp) cuts the image into strips of rows (slices),
/// not tiles: the tallest strip (a multiple of the alignment 2^(L-1)) of at most
/// kStreamStripPixels input pixels (rows × the padded width across) whose predicted footprint
/// (memory_model.hpp's stream_footprint, on top of what the process holds already) fits the
/// budget; the alignment when none does, saying so. Taller strips hold more and hardly run
/// faster (unet-tiny, 2048² scene, one thread: 56-row strips 2.78 s of CPU, 128-row 2.88 s,
/// 16-row 3.06 s; peak RSS 407, 563, 313 MiB).
inline constexpr int64_t kStreamStripPixels = int64_t{1} << 17;

struct StripChoice {
  int64_t strip = 0;            ///< input rows (slices) per strip: InferenceOptions::strip
  int64_t predicted_bytes = 0;  ///< stream_footprint's bytes + the baseline
  int64_t carried_bytes = 0;    ///< of which carried rows and skip buffers (unscaled)
  int64_t budget_bytes = 0;
  std::string reason;

  /// "strips of 56 rows (largest up to 56 fitting the 2 GiB budget: predicted 310 MiB)".
  std::string summary() const;
};

/// The strip for `model` on an image `extent`; `memory_budget` 0: default_memory_budget().
StripChoice choose_strip(const UNetOptions& model, const Index& extent, int64_t memory_budget, int64_t baseline_bytes);

}  // namespace tessera

