#pragma once
// Sample-parallel inference: the tiles of one image spread over the ranks of a group, or,
// streamed (InferenceOptions::strip > 0), its bands of rows (InferenceOptions::band), each
// streamed by the rank that took it. Tiles and bands are independent (their halos make them
// exact), so there is no communication in the forward pass; "tile" below means either.
// Rank 0 lists the tiles still to do (a tile already in RUN/tiles/ that opens, decodes and
// sits where it should is kept; anything else is recomputed); ranks then take
// tiles one by one from a shared counter, so a rank that finishes early takes more; each
// writes its finished insets to RUN/tiles/<output name>/ atomically; rank 0 assembles the
// mosaic (GDAL VRT → GeoTIFF, or an ITK paste for volumes) and renames it into place.
// The mosaic equals single-process inference's output, and a rerun after a kill resumes.
#include <cstdint>
#include <functional>
#include <string>

#include "tessera/core/inference.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

struct SampleParallelOptions {
  std::string run_dir;        ///< required: tiles go to run_dir/tiles/<output file name>/
  InferenceOptions inference;
  /// Where rank 0 writes the assembled output (a run's staged path: tessera/run/output_set.hpp);
  /// empty: the output itself. The tiles and their record name the output.
  std::string assemble_into;

  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

struct SampleParallelReport {
  int64_t tiles = 0;           ///< tiles in the grid
  int64_t tiles_skipped = 0;   ///< found finished from an earlier run
  int64_t tiles_here = 0;      ///< computed by this rank
  /// This rank's FLOPs / those of one forward pass over the whole padded image (summed over
  /// the ranks: what the tiles or the bands recompute, InferenceReport::recompute).
  double recompute = 0;
  double seconds = 0;          ///< whole call, assembly included
  std::string tiles_dir;
};

/// Collective over `group`. Writes `output` (on rank 0) from `source` (every rank opens
/// the same image). `on_tile(done_here)` is called after each tile this rank finishes.
SampleParallelReport infer_sample_parallel(UNet& net, const ImageSource& source, const Normalization& norm,
                                           const std::string& output, Communicator& group,
                                           const SampleParallelOptions& options,
                                           const std::function<void(int64_t)>& on_tile = {});

}  // namespace tessera::parallel
