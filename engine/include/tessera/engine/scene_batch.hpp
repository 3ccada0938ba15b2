#pragma once
// Many scenes in one `tessera infer --input DIR --output DIR`, the way batch jobs want them:
//   * whole scenes are handed to the ranks, largest first: each rank takes the next unfinished
//     scene when it is free (a shared counter), and runs it alone (a one-rank communicator),
//     so a scene's labels are those of one process;
//   * a scene is finished when its labels and its STAC item are there and agree — the item
//     names the same model, checkpoint and input, and the raster opens with the item's shape —
//     so a rerun after a kill recomputes only the others (nothing half-written looks finished:
//     the item is written last);
//   * a scene that fails is reported in one line naming it; the others go on, and the run
//     exits non-zero at the end.
// Torch-free; the collectives go through parallel::Communicator.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::parallel {
class Communicator;
}

namespace tessera::engine {

struct SceneJob {
  std::string input, output;
  int64_t pixels = 0;  ///< pixels (or voxels) of the input: the order work is handed out in
};

/// What made a scene's outputs: compared with a finished scene's STAC item before keeping it.
struct SceneMaker {
  std::string model;       ///< e.g. "unet-tiny (random, seed 1)" or the checkpoint's model
  std::string checkpoint;  ///< absolute path, "" for --init random
};

/// Indices of `jobs`, largest first; equal sizes in input-name order.
std::vector<size_t> largest_first(const std::vector<SceneJob>& jobs);

/// "" when `job`'s labels and STAC item are finished and were made by `maker`; else why not
/// ("no labels yet", "no STAC item", "made by another checkpoint", ...).
std::string unfinished_reason(const SceneJob& job, const SceneMaker& maker);

struct SceneBatchReport {
  int64_t scenes = 0, kept = 0, failed = 0;
  std::vector<int64_t> per_rank;  ///< scenes each rank computed in this run
  double seconds = 0;
};

/// Runs `infer_scene` on every unfinished scene of `jobs`, whole scenes over the ranks of
/// `world`, largest first. Collective. Prints one line per kept scene (rank 0), one per scene
/// computed (by its rank) and one per failure; returns the same report on every rank.
SceneBatchReport run_whole_scenes(const std::vector<SceneJob>& jobs, const SceneMaker& maker,
                                  parallel::Communicator& world,
                                  const std::function<void(const SceneJob&)>& infer_scene);

}  // namespace tessera::engine
