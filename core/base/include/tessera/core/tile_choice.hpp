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
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/memory_model.hpp"
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

/// The widths of the column pieces a stream cuts an image of `extent` into along its second
/// axis (columns in 2-D, the rows of each slice in 3-D) to run them side by side, one intra-op
/// thread share each (InferenceOptions::columns): `count` pieces whose first columns are on the
/// pooling grid 2^(L−1) (so their columns are those of one pass over the whole image, as exact
/// tiles' are), all but the last as wide as ⌈extent[1] / count⌉ rounded up to the grid; fewer
/// where the image is too narrow for that many.
std::vector<int64_t> column_widths(const UNetOptions& model, const Index& extent, int64_t count);

/// FLOPs of one pass over each column piece's padded input (unet_whole_input of the image's
/// rows × the piece's width) / FLOPs of one pass over the whole padded image: what the pieces'
/// shared ε columns recompute. 1 for one piece.
double column_recompute(const UNetOptions& model, const Index& extent, int64_t count);

/// The widths of the column groups a stream cuts an image of `extent` into along its second
/// axis and streams one after another, each in its column pieces side by side
/// (InferenceOptions::groups): `count` groups, all but the last ⌈extent[1] / count⌉ wide
/// rounded up to kStreamGroupGrid; fewer where the image is too narrow for that many.
std::vector<int64_t> group_widths(const UNetOptions& model, const Index& extent, int64_t count);
/// A group's first column is on this grid: the label rasters' 256-pixel blocks (a group writes
/// whole blocks, none twice) and a multiple of every built-in U-Net's pooling grid 2^(L−1)
/// (L ≤ 9), so its columns are those of one pass over the whole image.
inline constexpr int64_t kStreamGroupGrid = 256;

/// FLOPs of one pass over each column piece (`columns` of them, column_widths) of each column
/// group (`groups`, group_widths), each over its own padded input / FLOPs of one pass over the
/// whole padded image. column_recompute is the one-group case.
double groups_recompute(const UNetOptions& model, const Index& extent, int64_t groups, int64_t columns);

/// The column groups a stream of `model` over `extent` in `columns` pieces streams one after
/// another: the most, up to kStreamMaxGroups, whose pieces together recompute at most
/// kStreamColumnRecompute; 1 when none does. What a stream holds — its carried rows, its
/// working strip, the input's blocks in GDAL's cache — is its group's width's, so two groups
/// hold about half of one (4096², unet-tiny, 2 pieces each: 4 pieces in all recompute 1.024×
/// against 1.008×; docs/streaming.md).
int64_t stream_groups(const UNetOptions& model, const Index& extent, int64_t columns);
/// Each group's strips run every layer once more for narrower rows, at a cost per call that
/// does not shrink with them (LibTorch's and oneDNN's dispatch): 8192², unet-tiny, 2 threads:
/// 1, 2 and 4 groups 32.3, 33.2 and 37.2 s for 347, 275 and 247 MiB (docs/streaming.md).
inline constexpr int64_t kStreamMaxGroups = 2;

/// The footprint of a stream over an image `extent` in strips of `strip` rows cut into
/// `columns` pieces side by side (column_widths): each piece's stream_footprint over its own
/// padded input, the parts summed (the pieces run at once); `bytes` = stream_resident_bytes of
/// the summed tensors (memory_model.hpp: the weights once, the same formula as one piece's
/// stream_footprint). What `tessera infer` predicts for a stream above its baseline.
StreamFootprint columns_footprint(const UNetOptions& model, const Index& extent, int64_t strip, int64_t columns);

/// Column pieces are used only while they recompute at most this much (issue 32's ≤ 1.05× the
/// useful work, with the rows' own margin): at 4096 wide two pieces of unet-tiny recompute 1.02×.
inline constexpr double kStreamColumnRecompute = 1.04;

/// Predicted time of a stream in strips of `strip` input rows (slices) over a padded input
/// of `whole_input` sides, on `threads` intra-op threads, relative to one forward pass over
/// the whole image at a tile's operator speed. Each convolution re-reads and copies its K − 1
/// carried rows once a strip, and its threads split its output rows (in 3-D: its slab's
/// slices × their rows), so a thin slab also leaves threads idle: level ℓ's operators on a
/// slab of u such rows run about u / (u + r₀) as fast as on a tile, with
/// r₀ = kStreamRowOverhead + kStreamThreadRowOverhead × (threads − 1). With share_ℓ the
/// level's FLOPs / the network's and u_ℓ = strip / 2^ℓ (× the level's rows across in 3-D):
///   Σ_ℓ share_ℓ × (1 + r₀ / u_ℓ).
/// Tiles' time is their recompute (tile_recompute) at a tile's speed; `--mode auto`
/// compares the two (choose_mode).
double stream_time_factor(const UNetOptions& model, const Index& whole_input, int64_t strip, int threads);
/// r₀ above, in rows. How each constant was obtained (docs/streaming.md, "Strip height"):
/// kStreamRowOverhead from one probe on one thread, unet-tiny at 4096 wide, strips of 8 to
/// 192 rows timed in CPU seconds against each other (8-row strips 13 % slower than 192-row
/// ones) → 0.3; it prices what one thread loses per strip and is what column pieces (one
/// thread each) run at. kStreamThreadRowOverhead from one two-thread run on a quiet host
/// (24-row strips at 1.10× the time of tiles of 384, which recompute 1.45×) → r₀ ≈ 3.8 for
/// two threads sharing a slab; a single measurement, not checked against another, and used
/// only where a stream runs one piece on several threads (narrow images, 3-D).
inline constexpr double kStreamRowOverhead = 0.3;
inline constexpr double kStreamThreadRowOverhead = 3.5;
/// A strip of at most this many input pixels (rows × the padded width across) costs little
/// memory: strips are never shorter than it allows. 2^15: 8 rows at 4096 wide, where 8-row
/// strips in two column pieces took no longer than 24-row ones (the bench's 4096² scene, 2
/// threads, quiet: 9.95–10.80 s against 10.32–10.98 s wall) and held 30 MiB less at the peak
/// (docs/streaming.md, "Memory: where it goes, and the floor"); 2^17 chose 24 rows there.
inline constexpr int64_t kStreamStripPixels = int64_t{1} << 15;
/// Strips are the shortest (a multiple of the alignment) predicted within this factor of
/// one pass's time (stream_time_factor): taller ones hold more memory and gain little.
inline constexpr double kStreamTimeTarget = 1.2;

/// Streamed inference (core/stream_executor.hpp) cuts the image into strips of rows (slices),
/// not tiles, and each strip into stream_columns() column pieces side by side; its time is
/// column_recompute × stream_time_factor of the widest piece on threads / pieces threads, its
/// footprint columns_footprint. The shortest strip (a multiple of the alignment 2^(L-1)) predicted within
/// kStreamTimeTarget of one pass's time, or the tallest of at most kStreamStripPixels where
/// that is taller; when its footprint (memory_model.hpp's stream_footprint of the strip
/// height, the padded width across and the channels, on top of what the process holds
/// already) does not fit the budget, the tallest shorter one that does; the alignment when
/// none does, saying so.
struct StripChoice {
  int64_t strip = 0;            ///< input rows (slices) per strip: InferenceOptions::strip
  int64_t columns = 1;          ///< column pieces run side by side: InferenceOptions::columns
  int64_t groups = 1;           ///< column groups streamed one after another: InferenceOptions::groups
  int64_t predicted_bytes = 0;  ///< stream_footprint's bytes + the baseline
  int64_t carried_bytes = 0;    ///< of which carried rows and skip buffers (unscaled)
  int64_t budget_bytes = 0;
  double predicted_time = 1;    ///< stream_time_factor of the strip
  std::string reason;

  /// "strips of 32 rows (predicted 1.08x one pass's time; 310 MiB within the 2 GiB budget)".
  std::string summary() const;
};

/// The column pieces a stream of `model` over `extent` runs side by side on `threads` intra-op
/// threads: the most pieces (a divisor of `threads`, each then on threads / pieces of them)
/// whose shared columns recompute at most kStreamColumnRecompute (column_recompute); 1 when
/// none does or `threads` is 1.
int64_t stream_columns(const UNetOptions& model, const Index& extent, int threads);

/// The strip for `model` on an image `extent`; `memory_budget` 0: default_memory_budget().
/// `threads`: the intra-op threads the stream will run on (stream_time_factor).
StripChoice choose_strip(const UNetOptions& model, const Index& extent, int64_t memory_budget, int64_t baseline_bytes,
                         int threads);

/// `--mode auto` between the tiles it chose and a stream, for a model that streams: by
/// predicted time, both relative to one pass over the image at a tile's operator speed —
/// the tiles' tile_recompute against the strip's stream_time_factor × what bands of `band`
/// rows recompute (band_recompute; 0: one band). The stream where it is predicted faster,
/// or where the whole image as one tile would hold more than kStreamMemoryAdvantage × the
/// stream's predicted memory (the same pass in a fraction of the memory); else the tiles.
struct ModeChoice {
  bool stream = false;
  double tile_time = 1;    ///< the tiles' predicted time (their recompute)
  double stream_time = 1;  ///< the stream's
  std::string why;         ///< "predicted 1.08x one pass's time against 1.45x for tiles of 384"
};
inline constexpr double kStreamMemoryAdvantage = 2.0;
ModeChoice choose_mode(const UNetOptions& model, const Index& extent, const TileChoice& tile, const StripChoice& strip,
                       int64_t band);

}  // namespace tessera

