#pragma once
// `tessera infer` as a library, behind a thin command (as nnU-Net's predictor object behind
// its entry points): an InferJob plans its inputs (one image, a folder of scenes, an MSD
// dataset's test images), loads the model (a checkpoint, or --init random), chooses each
// image's tile and precision, runs it over the ranks — one process, tiles spread with a run
// directory, whole scenes per rank, or every tile split with --sp — and writes each image's
// outputs through their sinks (labels, probabilities, overlay, reprojection, polygons, STAC;
// a folder's mosaic and collection), committed together or not at all
// (tessera/run/output_set.hpp). Each sink checks its options before any inference.
#include "tessera/engine/infer_options.hpp"

namespace tessera::parallel {
class Communicator;
}

namespace tessera::engine {

class InferJob {
 public:
  /// Checks the options that need no file. Throws tessera::Error naming the flag.
  explicit InferJob(InferOptions options);
  /// Collective over `world` (every rank calls it, with the same options). Prints one summary
  /// line per image (rank 0). Throws tessera::Error naming the file or the flag.
  void run(parallel::Communicator& world);

 private:
  InferOptions options_;
};

}  // namespace tessera::engine
