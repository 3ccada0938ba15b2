#pragma once
// `tessera eval` as a library: per-class Dice, IoU, precision and recall of a label map
// against the truth over the whole image or the held-back area, streamed in slabs so any size
// fits; optionally HD95 in physical units over the same area (which then has to fit in
// memory, one byte per pixel twice). Labels are 0..254; 255, NaN and anything else out of
// range is "no label". Torch-free.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/metrics.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/io/hausdorff.hpp"

namespace tessera::engine {

struct EvalOptions {
  std::string pred, truth;
  int classes = 0;                 ///< 0: the largest label seen + 1
  Holdout holdout;                 ///< fraction 0: the whole image
  bool hd95 = false;
  std::vector<std::string> names;  ///< class names, in order (others by number)
};

struct ClassEvaluation {
  int label = 0;
  std::string name;
  ClassScores scores;
  double hd95 = 0;  ///< NaN without --hd95 or where absent from both, inf where absent from one
};

struct Evaluation {
  EvalOptions options;
  Box region;
  io::GridSpacing spacing;  ///< the truth's (HD95's units)
  std::vector<ClassEvaluation> classes;
  double mean_dice = 0;  ///< over the classes present in the truth (0 when none is)
  double mean_iou = 0;   ///< the same; NaN when none
  double mean_hd95 = 0;  ///< the same; NaN without --hd95

  /// What `tessera eval --json` prints (NaN and infinity as null).
  nlohmann::json to_json() const;
};

/// Throws tessera::Error naming the file or the option.
Evaluation evaluate(const EvalOptions& options);

}  // namespace tessera::engine
