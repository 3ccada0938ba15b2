#pragma once
// Streaming tiled inference for one process: read window → network → crop inset → write.
// Memory is bounded by the tile and the batch, never by the image. For `valid` networks
// the stitched result equals the network applied to the whole reflect-padded image
// (DESIGN.md, "Exact tiling"); for `same` networks each tile crops its receptive-field halo.
// How a batch goes through the network is the caller's (InferenceOptions::forward): spatial-
// parallel inference runs each tile split over ranks (cli/cmd_infer.cpp) through this same loop.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "tessera/core/image_source.hpp"
#include "tessera/core/sliding_window.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// Runs `net` on a batch of input windows (B, C, input sides...) and returns its logits
/// (B, classes, sides...) for the whole windows: what net->forward(input) returns. Called on
/// the thread that called for_each_tile, in inference mode (c10::InferenceMode), once per batch,
/// in tile order; every rank that shares a forward (collectives inside) sees the same batches.
using ForwardRunner = std::function<torch::Tensor(UNet& net, const torch::Tensor& input)>;

struct InferenceOptions {
  int64_t tile = 512;     ///< inset side S; a multiple of the model's alignment 2^(L-1), clamped per
                          ///< axis to the image (tile_grid.hpp); `tessera infer` picks it (tile_choice.hpp)
  int batch = 1;          ///< tiles per forward pass
  int64_t strip = 0;      ///< > 0: streamed (stream_executor.hpp) in strips of this many input rows
                          ///< (slices in 3-D) across the whole image, no tiles; 0: tiles
  /// Set: overlapping windows of the training size blended with Gaussian weights
  /// (sliding_window.hpp, for_each_window), no tiles; `tile` and `strip` are unused.
  std::optional<SlidingWindowOptions> sliding;
  int64_t band = 0;       ///< streamed: output rows per band, a multiple of 2^(L-1); each band streams on its
                          ///< own from ε rows above it (re-reading its halo once, exchanging nothing), so
                          ///< sample-parallel ranks can take bands; 0: the whole image is one band
  int64_t columns = 1;    ///< streamed: column pieces run side by side (column_widths, tile_choice.hpp), each
                          ///< through its own executor on its share of the intra-op threads
  int64_t groups = 1;     ///< streamed: column groups (group_widths, tile_choice.hpp) streamed one after
                          ///< another, each in `columns` pieces: each band's groups are work items of their own
  bool progress = true;   ///< progress line on stderr
  bool prefetch = true;   ///< read the next batch on a background thread
  ForwardRunner forward;  ///< how a batch is run; empty: net->forward(input)

  InferenceOptions& with_tile(int64_t v) { tile = v; return *this; }
  InferenceOptions& with_batch(int v) { batch = v; return *this; }
  InferenceOptions& with_strip(int64_t v) { strip = v; return *this; }
  InferenceOptions& with_sliding(SlidingWindowOptions v) { sliding = std::move(v); return *this; }
  InferenceOptions& with_band(int64_t v) { band = v; return *this; }
  InferenceOptions& with_columns(int64_t v) { columns = v; return *this; }
  InferenceOptions& with_groups(int64_t v) { groups = v; return *this; }
  InferenceOptions& with_progress(bool v) { progress = v; return *this; }
  InferenceOptions& with_forward(ForwardRunner v) { forward = std::move(v); return *this; }

  /// Throws tessera::Error naming the bad field, e.g. a tile not on the pooling grid.
  void validate(const UNetOptions& model) const;
};

struct InferenceReport {
  int64_t tiles = 0;
  int64_t pixels = 0;            ///< output pixels kept (the image size)
  double seconds = 0;
  double useful_gflops = 0;      ///< FLOPs per output pixel × pixels, in GFLOP
  double overhead = 1;           ///< input pixels read / output pixels kept
  /// FLOPs executed / FLOPs of one forward pass over the whole padded image (unet_whole_input):
  /// what tiling recomputes in its halos; 1 (or just under: the pass stops at the last image
  /// row) when streamed.
  double recompute = 1;
  int64_t held_bytes = 0;        ///< streamed: peak bytes of carried rows and skip buffers
};

/// Throws tessera::Error naming the image when its bands are not the model's input channels.
void check_bands(const ImageSource& source, const UNetOptions& model);

/// The tile grid a model uses for an image extent and inset side.
TileGrid make_tile_grid(const UNetOptions& model, const Index& extent, int64_t tile);

/// The insets of the pieces of work for_each_tile hands out by index (a TileQueue's values):
/// the tile grid's (make_tile_grid), or with options.strip > 0 the bands: rows
/// [k·band, (k + 1)·band) across the whole image, the last one shorter (one band when
/// options.band is 0).
std::vector<Box> work_insets(const UNetOptions& model, const Index& extent, const InferenceOptions& options);

/// Calls `fn(tile, logits, valid)` for every tile, logits (classes, inset...) float and
/// valid (inset...) bool, both on the network's device (windows are read on the host and
/// moved there). The network runs in inference mode.
using TileCallback = std::function<void(const Tile&, const torch::Tensor&, const torch::Tensor&)>;
/// Which tiles to run: each call returns the next tile index, or -1 when there is no more
/// work. Always called on the thread that called for_each_tile (so it may talk to MPI);
/// sample-parallel inference hands out tiles through it. Empty: every tile, in order.
using TileQueue = std::function<int64_t()>;
/// `report.tiles` counts the tiles this call ran. With options.strip > 0 it is for_each_strip
/// (the queue hands out bands), with options.sliding for_each_window (no queue: one piece of work).
InferenceReport for_each_tile(UNet& net, const ImageSource& source, const Normalization& norm,
                              const InferenceOptions& options, const TileCallback& fn, const TileQueue& queue = {});

/// The streamed loop, band by band (work_insets; `queue` hands out band indices, empty: every
/// band in order): strips of options.strip input rows of the band's padded input
/// (unet_whole_input of the band, read from ε rows above it with reflection) through one
/// StreamExecutor per band; `fn` gets the band's rows finished by each strip as a Tile whose
/// index is the band's, whose output and inset are those rows across the image and whose
/// input is the strip's window (strips whose rows finish nothing call nothing). Bands start
/// on the pooling grid, so their rows equal one pass over the whole image. `report.tiles`
/// counts strips. The network runs in inference mode, channels-last, in its parameters' dtype
/// (bf16 weights: bf16 activations, fp32 logits).
InferenceReport for_each_strip(UNet& net, const ImageSource& source, const Normalization& norm,
                               const InferenceOptions& options, const TileCallback& fn, const TileQueue& queue = {});

/// The sliding-window loop (options.sliding): windows of the training input sides at
/// window_starts() per axis, in rows of windows along the first axis; each window's logits
/// (averaged over mirrored copies with `mirror`) weighted by the product of gaussian_profile()
/// and summed, divided by the summed weights. `fn` gets the image rows no later window reaches
/// as a Tile whose output, inset and input are those rows across the image (a band of
/// classes × rows × the image's other sides is held: memory grows with the image's cross
/// section, not its length). `report.tiles` counts windows; `recompute` is the windows' input
/// voxels over the image's. Inference mode, the network's device.
InferenceReport for_each_window(UNet& net, const ImageSource& source, const Normalization& norm,
                                const InferenceOptions& options, const TileCallback& fn);

/// Argmax labels of every tile written to `sink` (nodata → kNoDataLabel); does not commit.
InferenceReport infer_labels(UNet& net, const ImageSource& source, const Normalization& norm,
                             LabelSink& sink, const InferenceOptions& options);

/// Stitched logits (classes, extent...) of the whole image; for small images and tests.
torch::Tensor infer_logits(UNet& net, const ImageSource& source, const Normalization& norm,
                           const InferenceOptions& options);

}  // namespace tessera
